package mediadelete

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
	"github.com/playhead/playhead/webhooks"
)

// playbackBatch is how many playback rows of the media one statement deletes: a popular
// media's rows go in short statements (playback_media_idx), not one that holds a lock on
// thousands of rows the flush may be writing.
const playbackBatch = 1000

// Job runs deletion jobs.
type Job struct {
	// Pool is the database of the media and every row that names it.
	Pool *pgxpool.Pool
	// Objects is the object store the media's files are in.
	Objects storage.Store
	// Metrics counts deletions and the objects they removed.
	Metrics *Metrics
}

// Kind returns the deletion kind, with Run. Its completion locks the media row first (the
// order of every writer of the media) and deletes the rows that name the media, the media row
// last.
func (d *Job) Kind() jobqueue.Kind {
	k := Kind()
	k.Run = d.run
	return k
}

// Kind returns the deletion kind without Run, for a node that runs no jobs.
func Kind() jobqueue.Kind {
	return jobqueue.Kind{Name: KindDelete, Lock: lockMedia}
}

// lockMedia locks the media row, when there still is one. The owner's row is not locked: it
// may be gone (a member erasure), and a lock of the media row alone keeps the order of every
// writer (members → media → jobs).
func lockMedia(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM media WHERE id = $1 FOR UPDATE`, j.Subject); err != nil {
		return fmt.Errorf("lock media %d: %w", j.Subject, err)
	}
	return nil
}

// errStillRunning is an attempt that found a job of the media running.
var errStillRunning = errors.New("a job of the media is still running")

// run removes the media's objects and its playback rows, then returns the completion that
// deletes the other rows and the media row. Every step can run again: a retried attempt finds
// less to do.
func (d *Job) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	var args jobArgs
	if len(j.Args) > 0 {
		if err := json.Unmarshal(j.Args, &args); err != nil {
			return jobqueue.Result{}, jobqueue.Permanent(fmt.Errorf("deletion job %d: args %q: %w", j.ID, j.Args, err))
		}
	}
	running, err := d.settleJobs(ctx, j.Subject)
	if err != nil {
		return jobqueue.Result{}, err
	}
	// The objects go before any wait for a running job: links given before the deletion
	// (S3's presigned ones reach the store without Playhead) stop working now, not when that
	// job ends; what it writes until then goes at the attempt after it.
	if err := d.removeObjects(ctx, j.Subject, args); err != nil {
		return jobqueue.Result{}, err
	}
	if running != nil {
		return jobqueue.Result{}, running
	}
	if err := d.deletePlayback(ctx, j.Subject); err != nil {
		return jobqueue.Result{}, err
	}
	return jobqueue.Result{
		Commit: func(ctx context.Context, tx pgx.Tx) error { return deleteRows(ctx, tx, j) },
		Committed: func(context.Context) error {
			d.Metrics.deletions.Inc()
			return nil
		},
	}, nil
}

// settleJobs makes sure no job of the media will write anything: the jobs not running and
// those whose worker is gone (lease expired) are cancelled; a running one makes the attempt
// wait for its lease to end (it may be finishing; its completion, fenced off from a DELETED
// media, writes nothing, and its outputs are under hls/{id}/, removed by the next attempt).
// That wait is running, the attempt's error once it has removed the objects; err is an error
// of its own, and fails the attempt before anything is removed (a media not DELETED).
func (d *Job) settleJobs(ctx context.Context, id int64) (running, err error) {
	var wait *time.Duration
	err = pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) error {
		var status *string
		err := tx.QueryRow(ctx, `SELECT status FROM media WHERE id = $1 FOR UPDATE`, id).Scan(&status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("lock media %d: %w", id, err)
		}
		if status != nil && media.Status(*status) != media.StatusDeleted {
			return jobqueue.Permanent(fmt.Errorf("media %d is %s, not DELETED", id, *status))
		}
		if _, err := jobqueue.CancelSubject(ctx, tx, mediaKinds, id, cancelReason, true); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `
			SELECT min(lease_until - statement_timestamp()) FROM jobs
			WHERE subject_id = $1 AND kind = ANY($2) AND status = 'PROCESSING'`, id, mediaKinds).Scan(&wait)
		if err != nil {
			return fmt.Errorf("running jobs of media %d: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if wait != nil {
		return jobqueue.RetryAfter(errStillRunning, max(*wait, 100*time.Millisecond)), nil
	}
	return nil, nil
}

// removeObjects removes every object of media id: hls/{id}/ (every claim's folder with its
// renditions, thumbnail, storyboard and I-frame playlists, the captions' folders), the
// source's folder, and each resumable upload's bytes (its folder and its parts' write).
func (d *Job) removeObjects(ctx context.Context, id int64, args jobArgs) error {
	prefixes := []string{"hls/" + strconv.FormatInt(id, 10) + "/"}
	if folder, ok := sourceFolder(args.SourceKey); ok {
		prefixes = append(prefixes, folder)
	}
	for _, u := range args.Uploads {
		prefixes = append(prefixes, "tus/"+u.ID+"/")
	}
	var errs []error
	for _, prefix := range prefixes {
		n, err := d.countObjects(ctx, prefix)
		if err == nil {
			err = d.Objects.DeletePrefix(ctx, prefix)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", prefix, err))
			continue
		}
		d.Metrics.objects.Add(float64(n))
	}
	if parts, ok := d.Objects.(tus.Objects); ok {
		for _, u := range args.Uploads {
			if err := tus.RemoveUpload(ctx, parts, u.ID, u.PartsID); err != nil {
				errs = append(errs, fmt.Errorf("remove upload %s: %w", u.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sourceFolder is the folder of a media's source, uploads/{upload}/ or tus/{upload}/, and
// false for a key of any other shape: a deletion never removes more than one upload's folder.
func sourceFolder(key string) (string, bool) {
	dir := path.Dir(key)
	top, name, ok := strings.Cut(dir, "/")
	if !ok || (top != "uploads" && top != "tus") || name == "" || strings.Contains(name, "/") || name == ".." || name == "." {
		return "", false
	}
	return dir + "/", true
}

// countObjects counts the objects under prefix, for the metric of objects removed.
func (d *Job) countObjects(ctx context.Context, prefix string) (int, error) {
	n := 0
	for _, err := range d.Objects.List(ctx, prefix, "") {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// deletePlaybackBatchSQL deletes up to $2 playback rows of media $1: the batch found through
// playback_media_idx, each row then by its primary key.
const deletePlaybackBatchSQL = `
DELETE FROM playback WHERE (member_id, media_id) IN (
	SELECT member_id, media_id FROM playback WHERE media_id = $1 LIMIT $2)`

// deletePlayback deletes the media's playback rows (positions, watched ranges), a batch per
// statement. What a flush writes meanwhile is refused (the flush skips DELETED media) or
// deleted by the completion.
func (d *Job) deletePlayback(ctx context.Context, id int64) error {
	for {
		tag, err := d.Pool.Exec(ctx, deletePlaybackBatchSQL, id, playbackBatch)
		if err != nil {
			return fmt.Errorf("delete the playback rows of media %d: %w", id, err)
		}
		if tag.RowsAffected() < playbackBatch {
			return nil
		}
	}
}

// deleteRowsSQL are the statements of the completion, in order: what names the media, then the
// media row (captions, renditions and audience rows go with it, ON DELETE CASCADE). $1 is the
// media id; the jobs' statements have the kinds of the media's jobs (deletions included) as $2
// and the deletion job's own id as $3 (its row stays, COMPLETED, for the queue's retention);
// the events' have the outbox kind of media.deleted as $2. That event and its deliveries stay,
// so that it is delivered once like any other, and so do deliveries under way (QUEUED: their
// job holds them) with their events: they end as they would have, before the media.deleted
// event of their chain, and the event history's retention removes them all.
var deleteRowsSQL = []struct {
	sql  string
	args func(j jobqueue.Job) []any
}{
	{`DELETE FROM playback WHERE media_id = $1`, nil},
	{`DELETE FROM playback_last_finished WHERE media_id = $1`, nil},
	{`UPDATE import_rows SET media_id = NULL, media_deleted_at = statement_timestamp() WHERE media_id = $1`, nil},
	{`DELETE FROM audience_dirty WHERE media_id = $1`, nil},
	{`DELETE FROM uploads WHERE media_id = $1`, nil},
	{`DELETE FROM job_dependencies WHERE job_id IN (` + finishedJobsSQL + `)`, jobsArgs},
	{`DELETE FROM job_dependencies WHERE parent_id IN (` + finishedJobsSQL + `)`, jobsArgs},
	{`DELETE FROM jobs WHERE id IN (` + finishedJobsSQL + `)`, jobsArgs},
	// The events' ids as an array, not an IN (subquery): with the subquery the planner hashed
	// the events and read every delivery (a sequential scan, 3.5 ms at 20 000 deliveries);
	// with the array it probes their (outbox_id, endpoint_id) key (0.3 ms), whatever the
	// table holds (TestDeleteJob_StatementsReadTheMediaNotTheTables).
	{`DELETE FROM webhook_deliveries WHERE status IN ('WAITING', 'DELIVERED', 'DEAD')
		AND outbox_id = ANY (ARRAY(SELECT id FROM notification_outbox WHERE media_id = $1 AND kind <> $2))`, eventArgs},
	{`DELETE FROM notification_outbox o WHERE o.media_id = $1 AND o.kind <> $2
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.outbox_id = o.id)`, eventArgs},
	{`DELETE FROM media WHERE id = $1`, nil},
}

// finishedJobsSQL selects the media's jobs that have ended, but the deletion job's own.
const finishedJobsSQL = `SELECT id FROM jobs WHERE subject_id = $1 AND kind = ANY($2) AND status IN ('COMPLETED', 'DEAD') AND id <> $3`

func jobsArgs(j jobqueue.Job) []any {
	return []any{append(append([]string(nil), mediaKinds...), KindDelete), j.ID}
}

func eventArgs(jobqueue.Job) []any { return []any{media.OutboxDeleted} }

// deleteRows runs deleteRowsSQL for j's media in j's fenced completion, which holds the media
// row's lock, and notifies every node.
func deleteRows(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
	// The webhook chains of the media first: the statements remove its waiting deliveries,
	// which a delivery's job ending meanwhile must not make its chain's head.
	if err := webhooks.LockMediaChains(ctx, tx, j.Subject); err != nil {
		return err
	}
	for _, st := range deleteRowsSQL {
		args := []any{j.Subject}
		if st.args != nil {
			args = append(args, st.args(j)...)
		}
		if _, err := tx.Exec(ctx, st.sql, args...); err != nil {
			return fmt.Errorf("delete the rows of media %d: %w", j.Subject, err)
		}
	}
	return media.NotifyChanged(ctx, tx, j.Subject)
}
