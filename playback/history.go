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
const forgetSQL = `
WITH tomb AS (
	INSERT INTO playback_forgotten AS f (member_id, media_id, forgotten_at)
	SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM member_erasures e WHERE e.member_id = $1)
	ON CONFLICT (member_id, media_id) DO UPDATE SET forgotten_at = greatest(f.forgotten_at, excluded.forgotten_at)
), finished AS (
	DELETE FROM playback_last_finished WHERE member_id = $1 AND media_id = $2
)
DELETE FROM playback WHERE member_id = $1 AND media_id = $2`

// Forget deletes key's row (position, watched ranges, watched mark) and keeps the item from
// coming back from a report made before at. The caller drops the key from its own buffer.
func (s *Store) Forget(ctx context.Context, key Key, at time.Time) error {
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(forgetSQL, key.Member, key.Media, at)
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("forget playback row: %w", err)
	}
	return nil
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
const pauseSQL = `INSERT INTO history_paused (member_id, paused_at)
SELECT $1, statement_timestamp() WHERE NOT EXISTS (SELECT 1 FROM member_erasures e WHERE e.member_id = $1)
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
