package erasure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// MaxAttempts is the attempts of an erasure job. An attempt that finds media of the member
// still being deleted (their deletion jobs wait for running encodes) or an upload still being
// written ends in a retry; with the queue's backoff capped at PLAYHEAD_JOB_RETRY_CAP, 100
// attempts wait far longer than any of those.
const MaxAttempts = 100

// Job runs erasure jobs.
type Job struct {
	Pool *pgxpool.Pool
	// DeleteMedia deletes every media of member in tx (mediadelete.DeleteOwnedBy): the media
	// is missing for every read at its commit, and its own deletion job removes its objects and
	// rows, the media row last. A member's media goes even when other members have it in their
	// courses: those collections lose the lesson.
	DeleteMedia func(ctx context.Context, tx pgx.Tx, member int64) (int, error)
	// ExpireUploads runs one pass of the upload expiry (tus.Expirer.Expire), which removes the
	// uploads whose expiry has passed, with their stored bytes.
	ExpireUploads func(ctx context.Context) (int, error)
}

// Kind returns the erasure kind, with Run.
func (e *Job) Kind() jobqueue.Kind {
	k := Kind()
	k.Run = e.run
	return k
}

// Kind returns the erasure kind without Run, for a node that runs no jobs.
func Kind() jobqueue.Kind { return jobqueue.Kind{Name: KindErase} }

// errWaiting is an attempt that found what another process must remove first.
var errWaiting = errors.New("waiting")

// run deletes the member's data. Every step can run again: a retried attempt finds less to do.
//
//  1. In one transaction: their media are deleted (DeleteMedia), their uploads expire now, the
//     media they watched are marked for the audience rollups (recomputed without them), and
//     every row naming them that nothing else removes goes (deleteMemberRowsSQL).
//  2. The expiry pass removes their uploads and the uploads' bytes.
//  3. While a media or an upload of theirs is left, the attempt ends in a retry.
//  4. The completion deletes those rows again (an outbox row the media deletions wrote,
//     media.deleted, is addressed to them) and the member row last.
//  5. Once the completion has committed, the job deletes its own row (kind and subject, the
//     member id, and in its errors the id again, once per retried attempt): the job pruner
//     would keep it for PLAYHEAD_RETENTION_COMPLETED. A node that dies between the commit and
//     that delete leaves the row to the pruner.
//
// What stays is the erasure record.
func (e *Job) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	member := j.Subject
	err := pgx.BeginFunc(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := e.DeleteMedia(ctx, tx, member); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE uploads SET expires_at = statement_timestamp() - interval '1 microsecond'
			WHERE owner_id = $1 AND expires_at >= statement_timestamp()`, member); err != nil {
			return err
		}
		return deleteMemberRows(ctx, tx, member)
	})
	if err != nil {
		return jobqueue.Result{}, fmt.Errorf("erase member %d: %w", member, err)
	}
	var left struct{ media, uploads int }
	for {
		err := e.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM media WHERE owner_id = $1), (SELECT count(*) FROM uploads WHERE owner_id = $1)`,
			member).Scan(&left.media, &left.uploads)
		if err != nil {
			return jobqueue.Result{}, fmt.Errorf("erase member %d: %w", member, err)
		}
		if left.uploads == 0 {
			break
		}
		n, err := e.ExpireUploads(ctx)
		if err != nil {
			return jobqueue.Result{}, fmt.Errorf("erase member %d: %w", member, err)
		}
		if n == 0 { // one is being written to (its request holds its lock): the next attempt
			break
		}
	}
	if left.media > 0 || left.uploads > 0 {
		return jobqueue.Result{}, jobqueue.RetryAfter(fmt.Errorf("erase member %d: %w for %d media deletions and %d uploads",
			member, errWaiting, left.media, left.uploads), retryWait)
	}
	return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
		if err := deleteMemberRows(ctx, tx, member); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM members WHERE id = $1`, member)
		return err
	}, Committed: func(ctx context.Context) error {
		// Only the COMPLETED row: a row an admin retry made PENDING again meanwhile is a new
		// attempt, which deletes it when it completes.
		_, err := e.Pool.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND status = 'COMPLETED'`, j.ID)
		return err
	}}, nil
}

// retryWait is how long an attempt that waits for media deletions asks the runner to wait:
// a deletion job removes its objects in seconds unless an encode of the media is running.
const retryWait = 2 * time.Second

// deleteMemberRowsSQL deletes, in one statement, every row that names member ($1) and that
// neither the media deletions nor the upload expiry remove: positions and watched ranges
// (after marking their media for the audience rollups), the collections' last-finished
// marks, the finishes and course completions not announced or announced (package completion),
// forgotten items' tombstones, a paused history, the events addressed to them with
// their webhook deliveries, their events' retention mark, their xAPI statements not yet
// accepted by the LRS (package xapi: their jobs find nothing to send). The webhook endpoints, imports and
// captions they created stay (an endpoint is the operator's integration, an import the
// collections every member follows, a caption part of a media others play), without their
// creator: created_by becomes 0 (no member has that id; the endpoints and captions' columns
// have no foreign key), NULL for an import (its column references members).
const deleteMemberRowsSQL = `
WITH dirty AS (
	INSERT INTO audience_dirty (media_id)
	SELECT DISTINCT media_id FROM playback WHERE member_id = $1 ORDER BY 1
	ON CONFLICT (media_id) DO NOTHING
), positions AS (
	DELETE FROM playback WHERE member_id = $1
), finished AS (
	DELETE FROM playback_last_finished WHERE member_id = $1
), completions AS (
	DELETE FROM playback_completions WHERE member_id = $1
), courses AS (
	DELETE FROM collection_completions WHERE member_id = $1
), tombstones AS (
	DELETE FROM playback_forgotten WHERE member_id = $1
), paused AS (
	DELETE FROM history_paused WHERE member_id = $1
), retention AS (
	DELETE FROM outbox_retention WHERE member_id = $1
), statements AS (
	DELETE FROM xapi_statements WHERE member_id = $1
), endpoints AS (
	UPDATE webhook_endpoints SET created_by = 0 WHERE created_by = $1
), imports AS (
	UPDATE imports SET created_by = NULL WHERE created_by = $1
), captions AS (
	UPDATE captions SET created_by = 0 WHERE created_by = $1
)
DELETE FROM webhook_deliveries WHERE outbox_id IN (SELECT id FROM notification_outbox WHERE member_id = $1)`

// deleteMemberRows runs deleteMemberRowsSQL, then deletes the member's outbox rows (their
// deliveries must be gone first: a data-modifying CTE's deletions are not visible to the
// foreign key checks of the same statement's other parts).
func deleteMemberRows(ctx context.Context, tx pgx.Tx, member int64) error {
	if _, err := tx.Exec(ctx, deleteMemberRowsSQL, member); err != nil {
		return fmt.Errorf("delete the rows of member %d: %w", member, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM notification_outbox WHERE member_id = $1`, member); err != nil {
		return fmt.Errorf("delete the events of member %d: %w", member, err)
	}
	return nil
}
