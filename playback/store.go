package playback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/buffer"
)

// Store reads and writes playback rows.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// flushSQL writes a whole batch in one round trip. The batch is coalesced (a key twice in one
// INSERT … ON CONFLICT is a cardinality error) and sorted (row locks in one order on every
// node). The event_time guard makes a late flush of an older position, from this node or
// another, a no-op. A newer position un-hides a hidden row: the member is watching again.
// DO UPDATE uses only excluded.* so the statement stays valid when playback is sharded.
const flushSQL = `
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at)
SELECT t.member_id, t.media_id, t.position_ms, t.event_time, $5
FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::timestamptz[]) AS t(member_id, media_id, position_ms, event_time)
ON CONFLICT (member_id, media_id) DO UPDATE
SET position_ms = excluded.position_ms,
    event_time  = excluded.event_time,
    updated_at  = excluded.updated_at,
    hidden      = false
WHERE p.event_time < excluded.event_time`

// Flush writes a coalesced, sorted batch with one statement. It is the playback buffer's
// flush function.
func (s *Store) Flush(ctx context.Context, batch []buffer.Entry[Key, Position]) error {
	members := make([]int64, len(batch))
	medias := make([]int64, len(batch))
	positions := make([]int32, len(batch))
	times := make([]time.Time, len(batch))
	for i, e := range batch {
		members[i], medias[i] = e.Key.Member, e.Key.Media
		positions[i], times[i] = e.Value.PositionMS, e.Value.EventTime
	}
	if _, err := s.pool.Exec(ctx, flushSQL, members, medias, positions, times, time.Now()); err != nil {
		return flushError(len(batch), err)
	}
	return nil
}

// flushError tells the buffer whether a failed flush was the batch's fault: a database error
// whose SQLSTATE says the data was refused (apperr's one classification: class 22, data
// exception; class 23, integrity constraint, such as a media row deleted while its position
// was buffered; 54000) is, and the buffer splits the batch to find the rows at fault. Every
// other error (connection refused or reset, timeout, shutdown, out of connections) is not, and
// the buffer keeps the batch and retries it.
func flushError(rows int, err error) error {
	err = fmt.Errorf("flush %d playback rows: %w", rows, err)
	if apperr.FromDatabase(err) {
		return buffer.Rejected(err)
	}
	return err
}

// upsertOneSQL is the one-row form of flushSQL: the synchronous baseline writes with it, one
// statement per request, as the seed did before write-behind.
const upsertOneSQL = `
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (member_id, media_id) DO UPDATE
SET position_ms = excluded.position_ms,
    event_time  = excluded.event_time,
    updated_at  = excluded.updated_at,
    hidden      = false
WHERE p.event_time < excluded.event_time`

// UpsertOne writes one position on the request path (the synchronous baseline).
func (s *Store) UpsertOne(ctx context.Context, key Key, pos Position) error {
	if _, err := s.pool.Exec(ctx, upsertOneSQL, key.Member, key.Media, pos.PositionMS, pos.EventTime, time.Now()); err != nil {
		return fmt.Errorf("write playback row: %w", err)
	}
	return nil
}

// Stored is a playback row as read back.
type Stored struct {
	Position
	Hidden bool
}

// Get returns the stored row for key, and false when there is none.
func (s *Store) Get(ctx context.Context, key Key) (Stored, bool, error) {
	var st Stored
	err := s.pool.QueryRow(ctx, `SELECT position_ms, event_time, hidden FROM playback WHERE member_id = $1 AND media_id = $2`,
		key.Member, key.Media).Scan(&st.PositionMS, &st.EventTime, &st.Hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, false, nil
	}
	if err != nil {
		return Stored{}, false, fmt.Errorf("read playback row: %w", err)
	}
	return st, true, nil
}

// Open creates the row for key at position 0 if it does not exist, and returns the stored
// row, in one statement: a player opening a video costs one round trip. (Both halves of the
// UNION read the same snapshot, so a row inserted here comes back through RETURNING.)
func (s *Store) Open(ctx context.Context, key Key, at time.Time) (Stored, error) {
	var st Stored
	err := s.pool.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
			VALUES ($1, $2, 0, $3, $3)
			ON CONFLICT (member_id, media_id) DO NOTHING
			RETURNING position_ms, event_time, hidden)
		SELECT position_ms, event_time, hidden FROM ins
		UNION ALL
		SELECT position_ms, event_time, hidden FROM playback WHERE member_id = $1 AND media_id = $2
		LIMIT 1`, key.Member, key.Media, at).Scan(&st.PositionMS, &st.EventTime, &st.Hidden)
	if err != nil {
		return Stored{}, fmt.Errorf("open playback row: %w", err)
	}
	return st, nil
}

// Hide removes key from the continue-watching list. It bumps event_time to at, so a position
// reported before the hide and flushed after it cannot bring the row back. pos is written
// when the row does not exist yet (its report may still be in a buffer).
func (s *Store) Hide(ctx context.Context, key Key, pos Position, at time.Time) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, hidden)
		VALUES ($1, $2, $3, $4, $4, true)
		ON CONFLICT (member_id, media_id) DO UPDATE
		SET hidden = true, event_time = excluded.event_time, updated_at = excluded.updated_at
		WHERE p.event_time < excluded.event_time`, key.Member, key.Media, pos.PositionMS, at)
	if err != nil {
		return fmt.Errorf("hide playback row: %w", err)
	}
	return nil
}

// Item is one entry of the continue-watching list.
type Item struct {
	MediaID    int64     `json:"media_id"`
	Title      string    `json:"title"`
	PositionMS int32     `json:"position_ms"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	EventTime  time.Time `json:"event_time"`
}

// Cursor is where a continue-watching page ends: the last item's event_time and media id.
type Cursor struct {
	EventTime time.Time
	MediaID   int64
}

// List returns up to limit visible, playable items of member older than after (nil: from the
// newest), newest first, and the cursor of the next page (nil on the last page).
func (s *Store) List(ctx context.Context, member int64, after *Cursor, limit int) ([]Item, *Cursor, error) {
	var afterTime *time.Time
	var afterID int64
	if after != nil {
		afterTime, afterID = &after.EventTime, after.MediaID
	}
	rows, err := s.pool.Query(ctx, `
		SELECT p.media_id, m.title, p.position_ms, coalesce(m.duration_ms, 0), p.event_time
		FROM playback p
		JOIN media m ON m.id = p.media_id
		WHERE p.member_id = $1 AND NOT p.hidden
		  AND ($2::timestamptz IS NULL OR (p.event_time, p.media_id) < ($2, $3))
		  AND m.status = 'READY' AND (m.visibility = 'PUBLIC' OR m.owner_id = $1)
		ORDER BY p.event_time DESC, p.media_id DESC
		LIMIT $4`, member, afterTime, afterID, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("list playback: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		err := row.Scan(&it.MediaID, &it.Title, &it.PositionMS, &it.DurationMS, &it.EventTime)
		return it, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list playback: %w", err)
	}
	if len(items) <= limit {
		return items, nil, nil
	}
	items = items[:limit]
	last := items[limit-1]
	return items, &Cursor{EventTime: last.EventTime, MediaID: last.MediaID}, nil
}
