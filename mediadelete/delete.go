// Package mediadelete deletes media: the request's transaction (Delete) makes the media
// DELETED, missing for every read at once, and enqueues a deletion job that removes its
// objects and every row that names it, the media row last.
//
// It is a package of its own, not part of media, because it knows every kind of job whose
// subject is a media (encodejobs and ingest import media) and the resumable uploads' bytes
// (tus).
package mediadelete

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// KindDelete is the queue kind of a media's deletion job; its subject is the media id.
const KindDelete = "media_delete"

// MaxAttempts is the attempts of a deletion job. An attempt that finds a job of the media still
// running is retried when that job's lease ends (PLAYHEAD_JOB_LEASE, 60 s by default): 100
// attempts wait out a rendition at PLAYHEAD_ENCODE_TIMEOUT's default of 30 minutes, and
// leave room for failures of the object store.
const MaxAttempts = 100

// mediaKinds are the kinds of jobs whose subject is a media and that a deletion cancels: the
// encode and the import's download.
var mediaKinds = append(slices.Clone(encodejobs.Kinds), ingest.KindIngest)

// cancelReason is the error of a job cancelled because its media was deleted.
const cancelReason = "cancelled: its media was deleted"

// jobArgs are a deletion job's Args: what its run needs that may be gone by then. A member
// erasure deletes its member's upload rows (their owner) in the same transaction as the
// deletions, so the job reads where the bytes are from here, never from those rows.
type jobArgs struct {
	// SourceKey is the media's source object (uploads/{upload}/source, tus/{upload}/source),
	// empty for media registered without one.
	SourceKey string `json:"source_key,omitempty"`
	// Uploads are the resumable uploads that became the media.
	Uploads []uploadRef `json:"uploads,omitempty"`
}

// uploadRef is one resumable upload's bytes: its folder tus/{ID}/ and its parts' write.
type uploadRef struct {
	ID      string `json:"id"`
	PartsID string `json:"parts_id"`
}

// Delete deletes media id inside tx, the caller's transaction. In tx it locks the media's
// owner row and then the media row (members → media → jobs, the order of every writer), makes
// the media DELETED, cancels its encode and import jobs that are not running (DEAD, without
// telling the owner), notifies every node (their media caches evict it, so every read finds it
// missing from the commit on), writes the media.deleted event to the outbox (delivered by
// webhooks, sent on event streams) and enqueues its deletion job. A media that is missing or
// DELETED already is an apperr.NotFound error.
//
// After the commit the deletion job (Job) removes every object of the media (hls/{id}/, its
// source, its resumable uploads' bytes), then waits while a job of the media is still running
// (whose completion then writes nothing: the pipeline's writes are fenced off from a DELETED
// media) and removes what it wrote meanwhile, then its rows: playback positions and watched
// ranges, playback_last_finished rows, the link of the import rows that placed it (the
// collection loses the lesson), captions, renditions, audience rows, upload rows, its finished
// jobs, its webhook deliveries and events other than media.deleted, and last the media row. The
// job reads neither the member row nor the media's upload rows (what it needs of them is in its
// arguments): it does its work when a member erasure has deleted the member's upload rows
// since, and when the member row is locked or gone (an erasure deletes it last, once the media
// rows are).
func Delete(ctx context.Context, tx pgx.Tx, id int64) error {
	return deleteMedia(ctx, tx, id, 0)
}

// DeleteOwnedBy deletes, as Delete does, every media of member that is not DELETED already, in
// tx, and returns how many.
func DeleteOwnedBy(ctx context.Context, tx pgx.Tx, member int64) (int, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM media WHERE owner_id = $1 AND status <> 'DELETED' ORDER BY id`, member)
	if err != nil {
		return 0, fmt.Errorf("media of member %d: %w", member, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("media of member %d: %w", member, err)
	}
	for _, id := range ids {
		if err := Delete(ctx, tx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// deleteMedia is Delete, of owner's media only when owner is not 0: another member's media is
// not found, exactly like a missing one.
func deleteMedia(ctx context.Context, tx pgx.Tx, id, owner int64) error {
	// Another member's media is not found before anything is locked: a flood of their DELETEs
	// must not hold the owner's row and the media row (FOR UPDATE stalls every flush writing a
	// first position of the media, through its foreign key check). A media's owner never
	// changes, so the check holds once the rows are locked.
	if owner != 0 {
		var mine bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM media WHERE id = $1 AND owner_id = $2 AND status <> 'DELETED')`, id, owner).Scan(&mine)
		if err != nil {
			return fmt.Errorf("delete media %d: %w", id, err)
		}
		if !mine {
			return apperr.Errorf(apperr.NotFound, "media %d not found", id)
		}
	}
	if err := media.LockWithOwner(ctx, tx, id); err != nil {
		return err
	}
	var args jobArgs
	var source *string
	var ownerID int64
	err := tx.QueryRow(ctx, `
		UPDATE media SET status = 'DELETED', updated_at = statement_timestamp()
		WHERE id = $1 AND status <> 'DELETED' AND ($2 = 0 OR owner_id = $2)
		RETURNING owner_id, source_key`, id, owner).Scan(&ownerID, &source)
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	if err != nil {
		return fmt.Errorf("delete media %d: %w", id, err)
	}
	if source != nil {
		args.SourceKey = *source
	}
	rows, err := tx.Query(ctx, `SELECT id, parts_id FROM uploads WHERE media_id = $1 ORDER BY id`, id)
	if err != nil {
		return fmt.Errorf("uploads of media %d: %w", id, err)
	}
	args.Uploads, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (uploadRef, error) {
		var u uploadRef
		err := row.Scan(&u.ID, &u.PartsID)
		return u, err
	})
	if err != nil {
		return fmt.Errorf("uploads of media %d: %w", id, err)
	}
	if _, err := jobqueue.CancelSubject(ctx, tx, mediaKinds, id, cancelReason, false); err != nil {
		return err
	}
	if err := media.NotifyChanged(ctx, tx, id); err != nil {
		return err
	}
	if err := media.Outbox(ctx, tx, ownerID, id, media.OutboxDeleted, nil); err != nil {
		return err
	}
	if _, err := jobqueue.EnqueueWithArgs(ctx, tx, KindDelete, id, MaxAttempts, args); err != nil {
		return fmt.Errorf("enqueue the deletion of media %d: %w", id, err)
	}
	return nil
}
