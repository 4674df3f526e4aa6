package playback

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/erasure"
)

// forgetSQL deletes one item of a member's history for real: the row with its watched ranges
// and the collections' last-finished marks naming it, and leaves a tombstone
// (playback_forgotten) that keeps a report made before now, still in a buffer or a spill file,
// from creating the row again (keptSQL); erasure.TombstoneKind prunes it after
// erasure.TombstoneKeep. No tombstone is left for an erased member.
var forgetSQL = `
WITH tomb AS (
	INSERT INTO playback_forgotten AS f (member_id, media_id, forgotten_at)
	SELECT $1, $2, $3 WHERE ` + erasure.AntiJoin("$1") + `
	ON CONFLICT (member_id, media_id) DO UPDATE SET forgotten_at = greatest(f.forgotten_at, excluded.forgotten_at)
), finished AS (
	DELETE FROM playback_last_finished WHERE member_id = $1 AND media_id = $2
)
DELETE FROM playback WHERE member_id = $1 AND media_id = $2`

// forgetAgainSQL deletes key's row again when its report predates the item's tombstone, with
// the collections' last-finished marks it brought: what a flush in flight when the forget
// committed wrote (its statement's snapshot did not see the tombstone). Both deletes name the
// member, so each reaches one shard when playback is sharded (the Citus test checks it).
const forgetAgainSQL = `
WITH gone AS (
	DELETE FROM playback p USING playback_forgotten f
	WHERE p.member_id = $1 AND p.media_id = $2 AND f.member_id = $1 AND f.media_id = $2 AND p.event_time <= f.forgotten_at
	RETURNING p.member_id, p.media_id
)
DELETE FROM playback_last_finished l WHERE l.member_id = $1 AND l.media_id = $2 AND EXISTS (SELECT 1 FROM gone)`

// ForgetWait bounds how long a forget waits for the flushes in flight when its tombstone
// committed (Forget): a flush holds the fence for milliseconds, so a writer still running after
// this is stuck, and the forgotten_prune sweep deletes what it brings back.
const ForgetWait = 5 * time.Second

// Forget deletes key's row (position, watched ranges, watched mark) and keeps the item from
// coming back from a report made before at. The caller drops the key from its own buffer.
//
// A flush of another node whose statement took its snapshot before the tombstone committed
// does not see it and can insert the row again: Forget waits for every fenced writer that
// began before the commit (erasure.WaitForWritersBefore, which takes no lock: a member
// repeating forgets holds no writer back), at most ForgetWait, then deletes the row again
// (forgetAgainSQL). It returns settled false when the wait gave up: a writer older than the
// tombstone may still write the row, and the next forgotten_prune run deletes it.
func (s *Store) Forget(ctx context.Context, key Key, at time.Time) (settled bool, err error) {
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(forgetSQL, key.Member, key.Media, at)
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return false, fmt.Errorf("forget playback row: %w", err)
	}
	var committed time.Time // after the tombstone's commit, on the database's clock
	if err := s.pool.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&committed); err != nil {
		return false, fmt.Errorf("forget playback row: %w", err)
	}
	wait, cancel := context.WithTimeout(ctx, s.forgetWait)
	defer cancel()
	waitErr := erasure.WaitForWritersBefore(wait, s.pool, committed)
	if waitErr != nil && (ctx.Err() != nil || wait.Err() == nil) { // the request ended, or the database failed
		return false, fmt.Errorf("forget playback row: %w", waitErr)
	}
	if _, err := s.pool.Exec(ctx, forgetAgainSQL, key.Member, key.Media); err != nil {
		return false, fmt.Errorf("forget playback row: %w", err)
	}
	return waitErr == nil, nil
}

// Settings are a member's choices about their history.
type Settings struct {
	// HistoryPaused stops the storing of the member's history: while it is set, position
	// reports are accepted and dropped, so no row is created and none changes (no position, no
	// watched ranges, nothing for the audience figures); what was stored before stays.
	HistoryPaused bool `json:"history_paused"`
}

// Settings reads member's settings.
func (s *Store) Settings(ctx context.Context, member int64) (Settings, error) {
	var st Settings
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM history_paused WHERE member_id = $1)`, member).Scan(&st.HistoryPaused)
	if err != nil {
		return Settings{}, fmt.Errorf("read settings: %w", err)
	}
	return st, nil
}

// pauseSQL pauses a member's history, unless they are erased.
var pauseSQL = `INSERT INTO history_paused (member_id, paused_at)
SELECT $1, statement_timestamp() WHERE ` + erasure.AntiJoin("$1") + `
ON CONFLICT (member_id) DO NOTHING`

// SaveSettings stores member's settings. A pause takes effect for every report flushed after it
// commits, including those accepted before.
func (s *Store) SaveSettings(ctx context.Context, member int64, st Settings) error {
	var b pgx.Batch
	erasure.Fence(&b)
	if st.HistoryPaused {
		b.Queue(pauseSQL, member)
	} else {
		b.Queue(`DELETE FROM history_paused WHERE member_id = $1`, member)
	}
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}
