package media

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/hls"
)

// An encode group (encodejobs) records each rendition it writes as a media_renditions row, and
// the media's master playlist is assembled from the rows each time it is served (the key
// AssembledMaster names, which no file has): it lists the renditions done so far, so a player
// that fetches it again, when playback starts again, gets the renditions that finished since.

// OutboxPlayable is the outbox kind of a media that became playable while it encodes.
const OutboxPlayable = "media_playable"

// AssembledMaster is the storage key of media id's assembled master playlist: served from its
// rendition rows, never stored (encoders write their files under hls/{id}/{claim}/).
func AssembledMaster(id int64) string { return "hls/" + strconv.FormatInt(id, 10) + "/master.m3u8" }

// RecordedRendition is one rendition an encode group's job wrote: its directory name (v0, v1,
// …, audio), the storage prefix of its files (hls/{media}/{claim}/), its master playlist entry
// with URIs relative to that prefix, and where the video starts in its segments' timestamps
// (µs, -1 for the audio).
type RecordedRendition struct {
	Name, Folder string
	Part         hls.Part
	StartUS      int64
}

// RecordRendition records rendition r of media id in the rendition job's fenced completion
// (which holds the media's lock), and makes the media playable, telling its owner, when its
// assembled master lists a first variant. A rendition of the name recorded before (a new
// encode of the same media) is replaced. Nothing is recorded for a DELETED media.
func RecordRendition(ctx context.Context, tx pgx.Tx, id int64, r RecordedRendition, payload map[string]any) error {
	if deleted, err := Deleted(ctx, tx, id); err != nil || deleted {
		return err
	}
	claim, ok := strings.CutPrefix(r.Folder, "hls/"+strconv.FormatInt(id, 10)+"/")
	if !ok || !strings.HasSuffix(claim, "/") || strings.Count(claim, "/") != 1 {
		return fmt.Errorf("media: rendition folder %q is not a folder of media %d's", r.Folder, id)
	}
	part := r.Part.Within(strings.TrimSuffix(claim, "/"))
	if _, err := tx.Exec(ctx, `
		INSERT INTO media_renditions (media_id, name, folder, part, start_us) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (media_id, name) DO UPDATE SET folder = excluded.folder, part = excluded.part,
		       start_us = excluded.start_us, created_at = excluded.created_at`,
		id, r.Name, r.Folder, part, r.StartUS); err != nil {
		return fmt.Errorf("record rendition %s of media %d: %w", r.Name, id, err)
	}
	parts, err := renditionParts(ctx, tx, id)
	if err != nil {
		return err
	}
	if _, variants := hls.Assemble(parts); variants == 0 {
		return nil // its audio is not there yet
	}
	var owner int64
	err = tx.QueryRow(ctx, `
		UPDATE media SET playable_at = statement_timestamp(), hls_key = $2, updated_at = statement_timestamp()
		WHERE id = $1 AND playable_at IS NULL AND status = 'PROCESSING' RETURNING owner_id`, id, AssembledMaster(id)).Scan(&owner)
	if err == pgx.ErrNoRows {
		return nil // playable already
	}
	if err != nil {
		return fmt.Errorf("make media %d playable: %w", id, err)
	}
	if err := NotifyChanged(ctx, tx, id); err != nil {
		return err
	}
	return Outbox(ctx, tx, owner, id, OutboxPlayable, payload)
}

// PlanRenditions starts an encode group's record of media id, in the probe's completion: the
// probed duration (so that the links of a media playable while it encodes last as long as the
// video), and no rendition recorded yet. Rows of an earlier encode are deleted (their files are
// then the orphan sweep's). Nothing is written for a DELETED media.
func PlanRenditions(ctx context.Context, tx pgx.Tx, id, durationMS int64) error {
	if deleted, err := Deleted(ctx, tx, id); err != nil || deleted {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM media_renditions WHERE media_id = $1`, id); err != nil {
		return fmt.Errorf("forget the renditions of media %d: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE media SET playable_at = NULL, duration_ms = nullif($2::bigint, 0), updated_at = statement_timestamp()
		WHERE id = $1`, id, durationMS); err != nil {
		return fmt.Errorf("plan the renditions of media %d: %w", id, err)
	}
	return NotifyChanged(ctx, tx, id)
}

// RecordPictures records the thumbnail and the storyboard (empty: none) an encode group's
// rendition wrote for media id; they are shown once it is READY. A DELETED media records none.
func RecordPictures(ctx context.Context, tx pgx.Tx, id int64, thumbnail, storyboard string) error {
	if _, err := tx.Exec(ctx, `UPDATE media SET thumbnail_key = $2, storyboard_key = nullif($3, ''), updated_at = statement_timestamp() WHERE id = $1 AND status <> 'DELETED'`,
		id, thumbnail, storyboard); err != nil {
		return fmt.Errorf("record the pictures of media %d: %w", id, err)
	}
	return nil
}

// MarkRenditionsReady makes media id READY with its recorded renditions (MarkReady: the
// assembled master, the pictures recorded, where the video starts in the segments).
func MarkRenditionsReady(ctx context.Context, tx pgx.Tx, id int64, payload map[string]any) error {
	var out Encoded
	err := tx.QueryRow(ctx, `
		SELECT coalesce(m.thumbnail_key, ''), coalesce(m.storyboard_key, ''), coalesce(m.duration_ms, 0),
		       coalesce((SELECT min(start_us) FROM media_renditions r WHERE r.media_id = m.id AND r.start_us >= 0), -1)
		FROM media m WHERE m.id = $1`, id).Scan(&out.ThumbnailKey, &out.StoryboardKey, &out.DurationMS, &out.StartUS)
	if err != nil {
		return fmt.Errorf("read the renditions of media %d: %w", id, err)
	}
	out.HLSKey = AssembledMaster(id)
	return MarkReady(ctx, tx, id, out, payload)
}

// isDeleted reports whether media id is DELETED or its row is gone, in a job's completion
// that holds the media row's lock.
func Deleted(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	var live bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM media WHERE id = $1 AND status <> 'DELETED')`, id).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("read the status of media %d: %w", id, err)
	}
	return !live, nil
}

func renditionParts(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, id int64) ([]hls.Part, error) {
	rows, err := db.Query(ctx, `SELECT part FROM media_renditions WHERE media_id = $1 ORDER BY name`, id)
	if err != nil {
		return nil, fmt.Errorf("read the renditions of media %d: %w", id, err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[hls.Part])
	if err != nil {
		return nil, fmt.Errorf("read the renditions of media %d: %w", id, err)
	}
	return parts, nil
}

// AssembledMaster returns media id's master playlist as assembled from its recorded
// renditions, URIs relative to hls/{id}/; nil when none can play yet.
func (s *Store) AssembledMaster(ctx context.Context, id int64) ([]byte, error) {
	parts, err := renditionParts(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	master, variants := hls.Assemble(parts)
	if variants == 0 {
		return nil, nil
	}
	return master.Marshal()
}
