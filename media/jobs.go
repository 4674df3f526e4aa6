package media

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/notify"
)

// ChannelChanged carries a media id whenever a media row changes; every node's media cache
// evicts that id.
const ChannelChanged = "media_changed"

// ChannelOutbox carries the member id of an outbox row whenever one is written: the webhook
// relay wakes at once instead of at its next poll, and each node's event streams of that member
// read the new rows.
const ChannelOutbox = "notification_outbox"

// The outbox kinds: what a member is told about their media.
const (
	OutboxReady  = "media_ready"
	OutboxFailed = "media_failed"
	// OutboxDeleted is written by the transaction that deletes the media.
	OutboxDeleted = "media_deleted"
)

// Outbox records a notification for member about media in the caller's transaction, so it is
// sent exactly when the change it announces commits. The webhook relay (package webhooks)
// delivers the rows; the notification on ChannelOutbox wakes it on commit.
func Outbox(ctx context.Context, db notify.Execer, member, media int64, kind string, payload map[string]any) error {
	if payload == nil {
		payload = map[string]any{}
	}
	_, err := db.Exec(ctx, `INSERT INTO notification_outbox (member_id, media_id, kind, payload) VALUES ($1, $2, $3, $4)`,
		member, media, kind, payload)
	if err != nil {
		return fmt.Errorf("outbox %s: %w", kind, err)
	}
	return notify.Send(ctx, db, ChannelOutbox, strconv.FormatInt(member, 10))
}

// JobKind returns the queue kind named name whose jobs are about a media item (the job's
// subject is the media id), with the hooks every such kind shares: its finishing transactions
// lock the media's owner row and then the media row before the queue locks the job row
// (members → media → jobs, the order of every writer); a DEAD job fails the media with the
// reason worded for its owner (jobqueue.ReasonOf) and tells them; an admin retry makes the
// media PROCESSING again, and is refused (409) for a DELETED media, whose jobs must never run
// again. The kind adds its Run.
func JobKind(name string) jobqueue.Kind {
	return jobqueue.Kind{
		Name: name,
		Lock: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
			return LockWithOwner(ctx, tx, j.Subject)
		},
		Fail: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job, cause error) error {
			// The owner is told the reason worded for them, never the error's text (server
			// paths, remote addresses): that stays in the job's last_error.
			reason := jobqueue.ReasonOf(cause)
			return markFailed(ctx, tx, j.Subject, reason, map[string]any{"job_id": j.ID, "reason": reason})
		},
		Revive: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
			if deleted, err := Deleted(ctx, tx, j.Subject); err != nil || deleted {
				if err == nil {
					err = apperr.Errorf(apperr.Conflict, "media %d is deleted: its jobs cannot run again", j.Subject)
				}
				return err
			}
			return SetStatus(ctx, tx, j.Subject, StatusProcessing)
		},
	}
}

// LockWithOwner locks media id's owner row, then the media row, in tx: two statements, so the
// order of the locks is certain (members → media → jobs, the order of every writer).
func LockWithOwner(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM members WHERE id = (SELECT owner_id FROM media WHERE id = $1) FOR UPDATE`, id); err != nil {
		return fmt.Errorf("lock owner of media %d: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM media WHERE id = $1 FOR UPDATE`, id); err != nil {
		return fmt.Errorf("lock media %d: %w", id, err)
	}
	return nil
}

// The writes below run inside the media pipeline's fenced job transactions, which have already
// locked the owner and media rows. Each notifies every node's cache on commit. Each is fenced
// off from a DELETED media (or one whose row is gone): it writes nothing and returns nil, so
// that a job which finishes after its media was deleted completes without bringing anything
// back; its outputs are the deletion job's and the orphan sweep's.

// Encoded is what an encode recorded of its outputs, as storage keys.
type Encoded struct {
	// HLSKey is the master playlist, ThumbnailKey a JPEG.
	HLSKey, ThumbnailKey string
	// StoryboardKey is the storyboard's WebVTT (seek-bar previews); empty when there is none.
	StoryboardKey string
	// DurationMS is the probed duration.
	DurationMS int64
	// StartUS is the presentation time, in µs, at which the video starts in its segments'
	// timestamps: cue time 0 of a caption maps to it (X-TIMESTAMP-MAP). Negative: unknown.
	StartUS int64
}

// MarkReady makes media id playable with its encoded outputs and tells its owner (one outbox
// row with payload). A DELETED media stays so.
func MarkReady(ctx context.Context, tx pgx.Tx, id int64, out Encoded, payload map[string]any) error {
	var owner int64
	err := tx.QueryRow(ctx, `
		UPDATE media SET status = 'READY', hls_key = $2, thumbnail_key = $3, duration_ms = nullif($4::bigint, 0),
		       storyboard_key = nullif($5, ''), hls_start_us = CASE WHEN $6::bigint < 0 THEN NULL ELSE $6 END,
		       failure_reason = NULL, updated_at = statement_timestamp()
		WHERE id = $1 AND status <> 'DELETED' RETURNING owner_id`, id, out.HLSKey, out.ThumbnailKey, out.DurationMS, out.StoryboardKey, out.StartUS).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted
	}
	if err != nil {
		return fmt.Errorf("mark media %d ready: %w", id, err)
	}
	if err := NotifyChanged(ctx, tx, id); err != nil {
		return err
	}
	return Outbox(ctx, tx, owner, id, OutboxReady, payload)
}

// markFailed records that media id will never become playable, and why, and tells its owner.
// A media FAILED already (another rendition of its encode group died first) keeps its first
// reason, and its owner is told once. A DELETED media stays so, and its owner is not told.
func markFailed(ctx context.Context, tx pgx.Tx, id int64, reason string, payload map[string]any) error {
	var owner int64
	err := tx.QueryRow(ctx, `
		UPDATE media SET status = 'FAILED', failure_reason = $2, updated_at = statement_timestamp()
		WHERE id = $1 AND status NOT IN ('FAILED', 'DELETED') RETURNING owner_id`, id, reason).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark media %d failed: %w", id, err)
	}
	if err := NotifyChanged(ctx, tx, id); err != nil {
		return err
	}
	return Outbox(ctx, tx, owner, id, OutboxFailed, payload)
}

// SetStatus moves media id to status (PROCESSING when a job is retried, UPLOADED when an
// import has fetched its file). A DELETED media stays so.
func SetStatus(ctx context.Context, tx pgx.Tx, id int64, status Status) error {
	_, err := tx.Exec(ctx, `UPDATE media SET status = $2, failure_reason = NULL, updated_at = statement_timestamp() WHERE id = $1 AND status <> 'DELETED'`, id, status)
	if err != nil {
		return fmt.Errorf("set media %d status: %w", id, err)
	}
	return NotifyChanged(ctx, tx, id)
}
