// Package markers is what a media item's owner marks in it for its viewers: the intro and the
// credits (columns of the media row, which the player offers to skip and completion reads),
// and its chapters (media_chapters), set as JSON or as a WebVTT chapters file. The chapters
// are shown with the media, in the player, and in its master playlist as Apple's
// com.apple.hls.chapters session data (media.ObjectsHandler).
package markers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// Store reads and writes a media item's markers and chapters.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Markers are a media item's intro and credits; nil is not marked.
type Markers struct {
	Intro   *media.Span `json:"intro"`
	Credits *media.Span `json:"credits"`
}

// errCheck turns a CHECK violation of the media row or a chapter (a duration changed since it
// was read) into the client's 422.
func errCheck(err error) error {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "23514" {
		return apperr.Errorf(apperr.Unprocessable, "the markers or chapters do not fit the media (%s): is its duration shorter?", pe.ConstraintName)
	}
	return err
}

func columns(s *media.Span) (start, end *int64) {
	if s == nil {
		return nil, nil
	}
	return &s.StartMS, &s.EndMS
}

// SetMarkers replaces the intro and credits of media id (nil removes one) and returns them.
// The media must not be DELETED; when owner is not 0, it must be owner's (another member's
// is not found, like a missing one).
func (s *Store) SetMarkers(ctx context.Context, id, owner int64, m Markers) (Markers, error) {
	introStart, introEnd := columns(m.Intro)
	creditsStart, creditsEnd := columns(m.Credits)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE media SET intro_start_ms = $3, intro_end_ms = $4, credits_start_ms = $5, credits_end_ms = $6,
				updated_at = statement_timestamp()
			WHERE id = $1 AND status <> 'DELETED' AND ($2 = 0 OR owner_id = $2)`,
			id, owner, introStart, introEnd, creditsStart, creditsEnd)
		if err != nil {
			return errCheck(err)
		}
		if tag.RowsAffected() == 0 {
			return apperr.Errorf(apperr.NotFound, "media %d not found", id)
		}
		return media.NotifyChanged(ctx, tx, id)
	})
	if err != nil {
		return Markers{}, fmt.Errorf("set markers: %w", err)
	}
	return m, nil
}

// SetChapters replaces the chapters of media id with chapters (sorted by start, distinct
// starts), under SetMarkers' conditions.
func (s *Store) SetChapters(ctx context.Context, id, owner int64, chapters []media.Chapter) error {
	starts := make([]int64, len(chapters))
	titles := make([]string, len(chapters))
	for i, c := range chapters {
		starts[i], titles[i] = c.StartMS, c.Title
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The row locked: two replacements of one media's list run one after the other, and a
		// deletion that marks it DELETED waits for (or is seen by) this one.
		var found bool
		err := tx.QueryRow(ctx, `SELECT true FROM media WHERE id = $1 AND status <> 'DELETED' AND ($2 = 0 OR owner_id = $2) FOR UPDATE`,
			id, owner).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "media %d not found", id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM media_chapters WHERE media_id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO media_chapters (media_id, start_ms, title)
			SELECT $1, s, t FROM unnest($2::bigint[], $3::text[]) AS c (s, t)`, id, starts, titles); err != nil {
			return errCheck(err)
		}
		return media.NotifyChanged(ctx, tx, id)
	})
	if err != nil {
		return fmt.Errorf("set chapters: %w", err)
	}
	return nil
}

// Chapters lists the chapters of media id by start (media.ChapterLister).
func (s *Store) Chapters(ctx context.Context, id int64) ([]media.Chapter, error) {
	rows, _ := s.pool.Query(ctx, `SELECT start_ms, title FROM media_chapters WHERE media_id = $1 ORDER BY start_ms`, id)
	chapters, err := pgx.CollectRows(rows, pgx.RowToStructByPos[media.Chapter])
	if err != nil {
		return nil, fmt.Errorf("list chapters of media %d: %w", id, err)
	}
	return chapters, nil
}
