// Package encodejobs is the encode job kind on the queue core (jobqueue): it turns an uploaded
// source into HLS with ffmpeg (encoder/) and makes the media READY in the fenced completion.
package encodejobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/captions"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// KindEncode is the job that turns an uploaded source into HLS.
const KindEncode = "encode"

// Encode runs encode jobs: fetch the media's source from storage, encode it into a scratch
// directory, upload the outputs under a prefix unique to the claim, and make the media READY
// in the fenced completion.
type Encode struct {
	Pool    *pgxpool.Pool
	Store   storage.Store
	Encoder *encoder.Encoder
	// ScratchDir holds each encode's temporary files; the system's temp dir when empty.
	ScratchDir string
}

// Kind returns the encode job kind for the queue: media.JobKind's hooks (lock the media's
// owner and media rows, fail the media when DEAD, revive it on an admin retry) and Run.
func (e *Encode) Kind() jobqueue.Kind {
	k := media.JobKind(KindEncode)
	k.Run = e.run
	return k
}

// OutputPrefix is where one claim's outputs go. The claim token makes it unique, so a worker
// that lost its claim can never overwrite the files of the one that won.
func OutputPrefix(mediaID int64, claimToken string) string {
	return fmt.Sprintf("hls/%d/%s/", mediaID, claimToken)
}

func (e *Encode) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	var sourceKey *string
	if err := e.Pool.QueryRow(ctx, `SELECT source_key FROM media WHERE id = $1`, j.Subject).Scan(&sourceKey); err != nil {
		return jobqueue.Result{}, fmt.Errorf("read media %d: %w", j.Subject, err)
	}
	if sourceKey == nil {
		return jobqueue.Result{}, jobqueue.Permanent(jobqueue.WithReason(errors.New("media has no uploaded source"), "the upload is missing"))
	}
	scratch, err := os.MkdirTemp(e.ScratchDir, "playhead-encode-*")
	if err != nil {
		return jobqueue.Result{}, err
	}
	defer os.RemoveAll(scratch)

	src := filepath.Join(scratch, "source")
	if err := e.fetch(ctx, *sourceKey, src); err != nil {
		return jobqueue.Result{}, err
	}
	outDir := filepath.Join(scratch, "out")
	out, err := e.Encoder.Encode(ctx, src, outDir)
	if err != nil {
		return jobqueue.Result{}, encodeFailure(err)
	}

	prefix := OutputPrefix(j.Subject, j.ClaimToken)
	discard := func(ctx context.Context) { _ = e.Store.DeletePrefix(ctx, prefix) }
	if err := storage.PutDir(ctx, e.Store, prefix, outDir); err != nil {
		discard(context.WithoutCancel(ctx))
		return jobqueue.Result{}, fmt.Errorf("store outputs: %w", err)
	}
	return jobqueue.Result{
		Commit: func(ctx context.Context, tx pgx.Tx) error {
			encoded := media.Encoded{HLSKey: prefix + out.Master, ThumbnailKey: prefix + out.Thumbnail,
				DurationMS: out.Probe.DurationMS, StartUS: out.StartUS}
			if out.Storyboard != "" {
				encoded.StoryboardKey = prefix + out.Storyboard
			}
			return media.MarkReady(ctx, tx, j.Subject, encoded, map[string]any{"job_id": j.ID})
		},
		Discard: discard,
		// A worker killed mid-encode (kill -9) could not delete its own prefix; the winner
		// removes every other claim's outputs once its own are recorded. A zombie that is
		// still running cleans up after itself when its heartbeat finds the claim lost.
		Committed: func(ctx context.Context) error {
			return e.removeLosers(ctx, j.Subject, j.ClaimToken)
		},
	}, nil
}

// notVideoReason is the failure_reason of an upload ffprobe cannot read as a video.
const notVideoReason = "not a playable video: the file is not an MP4, MOV, MKV, WebM, AVI, MPEG-TS or FLV video"

// encodeFailure words an encoder error for the uploader: not a video, or over a limit (both
// permanent), or an encode that failed (retried).
func encodeFailure(err error) error {
	if le, ok := errors.AsType[*encoder.LimitError](err); ok {
		return jobqueue.Permanent(jobqueue.WithReason(err, "too large: "+le.Detail))
	}
	if errors.Is(err, encoder.ErrNotVideo) {
		return jobqueue.Permanent(jobqueue.WithReason(err, notVideoReason))
	}
	return jobqueue.WithReason(err, "the video could not be encoded; an administrator can see why and retry it")
}

// removeLosers deletes the outputs of every claim of the media's encode but the winner's. The
// caption tracks under hls/{media}/ (captions.IsFolder) are not an encode's and stay: they
// belong to the media, whatever encode it has.
func (e *Encode) removeLosers(ctx context.Context, mediaID int64, winner string) error {
	parent := fmt.Sprintf("hls/%d/", mediaID)
	tokens, err := e.Store.Children(ctx, parent)
	if err != nil {
		return err
	}
	var errs []error
	for _, tok := range tokens {
		if tok != winner && !captions.IsFolder(tok) {
			errs = append(errs, e.Store.DeletePrefix(ctx, parent+tok+"/"))
		}
	}
	return errors.Join(errs...)
}

func (e *Encode) fetch(ctx context.Context, key, dst string) error {
	r, err := e.Store.Open(ctx, key)
	if err != nil {
		return fmt.Errorf("fetch source: %w", err)
	}
	defer r.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fetch source: %w", err)
	}
	return nil
}
