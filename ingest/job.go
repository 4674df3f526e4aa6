package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// Ingest runs ingest jobs on the queue core (same claim, lease, fencing, retries and DEAD as
// encoding): download the row's video to a temporary file, store it as the media's source, and
// in the fenced completion mark the media UPLOADED and enqueue the job that encodes it.
type Ingest struct {
	Store   *Store
	Objects storage.Store
	Fetcher *Fetcher
	Links   Links
	// EncodeKind is the kind of the job enqueued after the download (encodejobs.KindEncode,
	// wired by cmd/api: the two kinds do not import each other). Required.
	EncodeKind string
	// EncodeAttempts is that job's attempt limit.
	EncodeAttempts int
	// ScratchDir holds the temporary downloads; the system's temp dir when empty.
	ScratchDir string
}

// Kind returns the ingest job kind for the queue: media.JobKind's hooks (lock the media's
// owner and media rows, fail the media when DEAD, revive it on an admin retry) and Run.
func (in *Ingest) Kind() jobqueue.Kind {
	k := media.JobKind(KindIngest)
	k.Run = in.run
	return k
}

func (in *Ingest) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	raw, err := in.Store.source(ctx, j.Subject)
	if err != nil {
		return jobqueue.Result{}, err
	}
	primary, fallback := in.Links.Resolve(raw)
	tmp, err := os.CreateTemp(in.ScratchDir, "playhead-ingest-*")
	if err != nil {
		return jobqueue.Result{}, err
	}
	// The temporary file goes on every path: success, failure, cancellation.
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	if _, err := in.Fetcher.Fetch(ctx, primary, fallback, tmp); err != nil {
		return jobqueue.Result{}, fetchFailure(err)
	}
	if _, err := tmp.Seek(0, 0); err != nil {
		return jobqueue.Result{}, err
	}
	// Each attempt stores under its own key, so a late attempt cannot overwrite a winner's.
	key := fmt.Sprintf("uploads/ingest-%d-%s/source", j.Subject, randomHex())
	discard := func(ctx context.Context) { _ = in.Objects.DeletePrefix(ctx, key[:len(key)-len("source")]) }
	if _, err := in.Objects.Put(ctx, key, tmp); err != nil {
		discard(context.WithoutCancel(ctx))
		return jobqueue.Result{}, fmt.Errorf("store download: %w", err)
	}
	// A media deleted while it downloaded gets neither a source nor an encode, and the file goes
	// once the completion commits: the deletion job's arguments, taken at the deletion, name no
	// source, so it would stay until the orphan sweep's grace had passed. The completion holds
	// the media's lock (media.JobKind), so no deletion comes between the check and the writes.
	var deleted bool
	return jobqueue.Result{
		Commit: func(ctx context.Context, tx pgx.Tx) error {
			var err error
			if deleted, err = media.Deleted(ctx, tx, j.Subject); err != nil || deleted {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE media SET source_key = $2 WHERE id = $1`, j.Subject, key); err != nil {
				return err
			}
			if err := media.SetStatus(ctx, tx, j.Subject, media.StatusUploaded); err != nil {
				return err
			}
			// The encode takes the download's partition: the importer's, or "" when the
			// queue is first in, first out.
			spec, err := media.EncodeSpec(in.EncodeKind, j.Subject, in.EncodeAttempts, j.Partition)
			if err != nil {
				return err
			}
			_, err = jobqueue.Insert(ctx, tx, spec)
			return err
		},
		Discard: discard,
		Committed: func(ctx context.Context) error {
			if deleted {
				discard(ctx)
			}
			return nil
		},
	}, nil
}

// fetchFailure words a download error for the importer. A permanent one (an HTTP status, a
// file over the limit, a refused address, a web page instead of the file) is the fetcher's
// own short text; a retryable one may carry this server's addresses, so it is summarised.
func fetchFailure(err error) error {
	if IsPermanent(err) {
		reason := "the download failed: " + err.Error()
		if len(reason) > maxReasonBytes {
			reason = strings.ToValidUTF8(reason[:maxReasonBytes], "") + "…"
		}
		return jobqueue.Permanent(jobqueue.WithReason(err, reason))
	}
	// The next attempt is the queue's, after its backoff (or the server's Retry-After): this
	// one gives its download slot back now rather than sleeping in it.
	return jobqueue.RetryAfter(jobqueue.WithReason(err, "the download failed: the server could not be reached or kept failing"), RetryAfter(err))
}

// maxReasonBytes bounds a failure reason made from an error's text.
const maxReasonBytes = 300

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
