package media

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/notify"
)

// Store reads and writes media rows.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const mediaColumns = `id, owner_id, title, status, visibility, coalesce(duration_ms, 0), created_at, updated_at,
	coalesce(hls_key, ''), coalesce(thumbnail_key, ''), coalesce(storyboard_key, ''), coalesce(hls_start_us, -1),
	coalesce(failure_reason, ''), status = 'READY' OR status = 'PROCESSING' AND playable_at IS NOT NULL,
	intro_start_ms, intro_end_ms, credits_start_ms, credits_end_ms`

func scanMedia(row pgx.Row) (Media, error) {
	var m Media
	var introStart, introEnd, creditsStart, creditsEnd *int64
	err := row.Scan(&m.ID, &m.OwnerID, &m.Title, &m.Status, &m.Visibility, &m.DurationMS, &m.CreatedAt, &m.UpdatedAt,
		&m.HLSKey, &m.ThumbnailKey, &m.StoryboardKey, &m.HLSStartUS, &m.FailureReason, &m.Playable,
		&introStart, &introEnd, &creditsStart, &creditsEnd)
	m.Intro, m.Credits = span(introStart, introEnd), span(creditsStart, creditsEnd)
	return m, err
}

// EnsureMember creates the member row for id if it does not exist yet.
func EnsureMember(ctx context.Context, db notify.Execer, id int64) error {
	if _, err := db.Exec(ctx, `INSERT INTO members (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id); err != nil {
		return fmt.Errorf("ensure member: %w", err)
	}
	return nil
}

// Create inserts m (its ID and times are ignored) and returns the stored row.
func (s *Store) Create(ctx context.Context, m Media) (Media, error) {
	var out Media
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := EnsureMember(ctx, tx, m.OwnerID); err != nil {
			return err
		}
		var err error
		out, err = scanMedia(tx.QueryRow(ctx, `
			INSERT INTO media (owner_id, title, status, visibility, duration_ms)
			VALUES ($1, $2, $3, $4, nullif($5::bigint, 0))
			RETURNING `+mediaColumns, m.OwnerID, m.Title, m.Status, m.Visibility, m.DurationMS))
		if err != nil {
			return err
		}
		return NotifyChanged(ctx, tx, out.ID) // evicts a cached "no such media" for the new id
	})
	if err != nil {
		return Media{}, fmt.Errorf("create media: %w", err)
	}
	return out, nil
}

// Patch is a partial update; nil fields are left alone.
type Patch struct {
	Title      *string     `json:"title"`
	Status     *Status     `json:"status"`
	Visibility *Visibility `json:"visibility"`
	DurationMS *int64      `json:"duration_ms"`
}

// Update applies p to media id and notifies every node in the same transaction. A DELETED
// media is not found.
func (s *Store) Update(ctx context.Context, id int64, p Patch) (Media, error) {
	return s.update(ctx, id, 0, p)
}

// UpdateOwned is Update for media id only when owner owns it: another member's media is not
// found, exactly like a missing one.
func (s *Store) UpdateOwned(ctx context.Context, owner, id int64, p Patch) (Media, error) {
	return s.update(ctx, id, owner, p)
}

// update is Update, restricted to owner's media when owner is not 0.
func (s *Store) update(ctx context.Context, id, owner int64, p Patch) (Media, error) {
	var out Media
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = scanMedia(tx.QueryRow(ctx, `
			UPDATE media SET
				title       = coalesce($2, title),
				status      = coalesce($3, status),
				visibility  = coalesce($4, visibility),
				duration_ms = CASE WHEN $5::bigint IS NULL THEN duration_ms ELSE nullif($5, 0) END,
				updated_at  = statement_timestamp()
			WHERE id = $1 AND status <> 'DELETED' AND ($6 = 0 OR owner_id = $6)
			RETURNING `+mediaColumns, id, p.Title, p.Status, p.Visibility, p.DurationMS, owner))
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "media %d not found", id)
		}
		if err != nil {
			return err
		}
		return NotifyChanged(ctx, tx, id)
	})
	if err != nil {
		return Media{}, fmt.Errorf("update media: %w", err)
	}
	return out, nil
}

// NotifyChanged tells every node that media id changed. Call it in the transaction that
// changes the row, so the notification is sent exactly when the change commits.
func NotifyChanged(ctx context.Context, tx notify.Execer, id int64) error {
	return notify.Send(ctx, tx, ChannelChanged, fmt.Sprint(id))
}

// Get returns media id. A DELETED media is not found.
func (s *Store) Get(ctx context.Context, id int64) (Media, error) {
	m, err := scanMedia(s.pool.QueryRow(ctx, `SELECT `+mediaColumns+` FROM media WHERE id = $1 AND status <> 'DELETED'`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Media{}, apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	if err != nil {
		return Media{}, fmt.Errorf("get media: %w", err)
	}
	return m, nil
}

// LookupAccess returns the access fields of media id, and false when there is no such media
// or it is DELETED. It is the media cache's loader, so a deleted media is missing for every
// route that asks the cache (its objects, its signed URLs, positions) once its deletion's
// notification has evicted it.
func (s *Store) LookupAccess(ctx context.Context, id int64) (Access, bool, error) {
	var a Access
	err := s.pool.QueryRow(ctx, `SELECT owner_id, coalesce(duration_ms, 0), status, visibility, status = 'PROCESSING' AND playable_at IS NOT NULL,
		coalesce(credits_start_ms, 0)
		FROM media WHERE id = $1 AND status <> 'DELETED'`, id).Scan(&a.OwnerID, &a.DurationMS, &a.Status, &a.Visibility, &a.Encoding, &a.CreditsStartMS)
	if errors.Is(err, pgx.ErrNoRows) {
		return Access{}, false, nil
	}
	if err != nil {
		return Access{}, false, fmt.Errorf("look up media %d: %w", id, err)
	}
	return a, true, nil
}
