// Package encodejobs is the encode job kinds on the queue core (jobqueue): they turn an
// uploaded source into HLS with ffmpeg (encoder/) and make the media playable and READY in
// fenced completions.
//
// By default an upload's encode is a group of jobs (jobqueue.ContinueGroup): the encode job
// probes the source and plans its ladder, then hands on to rendition jobs, each on whatever
// worker claims it, and one finish job after all of them (READY). The ladder is split among
// the rendition jobs by encoder.SplitLadder: the lowest rung alone first (with the audio, the
// thumbnail and the storyboard), then the other rungs in at most RenditionJobs-1 jobs, a job
// per rung at most. Each rendition job records its renditions (media.RecordRendition) as it
// completes: the media is playable once the first can play, and its master playlist,
// assembled from those rows, gains the others as they finish. A worker killed mid-encode costs
// that job none of its attempts (a lost lease, bounded by jobqueue.Kind.MaxLostLeases); a rendition job that fails for good fails the media with its reason, its
// finish job is cancelled with it, and the renditions already written are kept (their rows
// name them, so the orphan sweep keeps their files) for an administrator's retry of the dead
// job, which finishes the group. With Single, an encode is the one job it was before
// (every rendition in one ffmpeg run, nothing playable before the whole ladder is done): less
// CPU in all, since the source is decoded once, but no faster with more workers.
package encodejobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/captions"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// The encode kinds: KindEncode is the job every upload enqueues (the probe of a group, or the
// whole encode with Single); KindRendition one rendition of a group, KindFinish its last job.
const (
	KindEncode    = "encode"
	KindRendition = "encode_rendition"
	KindFinish    = "encode_finish"
)

// Kinds are the names of the encode kinds, for a node's hooks and the orphan sweep.
var Kinds = []string{KindEncode, KindRendition, KindFinish}

// Encode runs the encode kinds: each job fetches the media's source from storage, encodes its
// part into a scratch directory, uploads the outputs under a prefix unique to the claim, and
// records them in its fenced completion.
type Encode struct {
	Pool    *pgxpool.Pool
	Store   storage.Store
	Encoder *encoder.Encoder
	// ScratchDir holds each encode's temporary files; the system's temp dir when empty.
	ScratchDir string
	// Single makes an encode the one job of before: every rendition in one ffmpeg run.
	Single bool
	// MaxAttempts is the attempts of each job of a group. Default 3.
	MaxAttempts int
	// RenditionJobs is the most rendition jobs a group splits its ladder into
	// (encoder.SplitLadder). Each decodes the source again, so more jobs cost more CPU and
	// spread one upload over more workers. Default 2: the lowest rung, then the others.
	RenditionJobs int
}

// Kinds returns the encode kinds for the queue, each with media.JobKind's hooks (lock the
// media's owner and media rows, fail the media when DEAD, revive it on an admin retry) and its
// Run. A finish job whose rendition died is cancelled with it (the rendition's Fail hook told
// the owner).
func (e *Encode) Kinds() []jobqueue.Kind {
	probe, rendition, finish := media.JobKind(KindEncode), media.JobKind(KindRendition), media.JobKind(KindFinish)
	probe.Run, rendition.Run, finish.Run = e.run, e.runRendition, e.runFinish
	return []jobqueue.Kind{probe, rendition, finish}
}

// OutputPrefix is where one claim's outputs go. The claim token makes it unique, so a worker
// that lost its claim can never overwrite the files of the one that won.
func OutputPrefix(mediaID int64, claimToken string) string {
	return fmt.Sprintf("hls/%d/%s/", mediaID, claimToken)
}

// renditionArgs are a rendition job's Args: its rungs of the ladder (0 the highest), the
// heights the probe planned for them, and whether it writes the audio and the pictures
// (thumbnail, storyboard) too: the job of the lowest rung does, from its own decode of the
// source. Every other job yields the CPU to it (encoder.RenditionOptions.Yield).
type renditionArgs struct {
	Rungs    []int `json:"rungs"`
	Heights  []int `json:"heights"`
	Audio    bool  `json:"audio"`
	Pictures bool  `json:"pictures"`
	// Rung and Height are the one rung of a job enqueued before a job could hold several
	// (a job per rung): a worker of this version that claims it during a rolling upgrade
	// encodes that rung (readRenditionArgs).
	Rung   *int `json:"rung,omitempty"`
	Height *int `json:"height,omitempty"`
}

// readRenditionArgs reads a rendition job's args, of either shape.
func readRenditionArgs(raw []byte) (renditionArgs, error) {
	var a renditionArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, err
	}
	if a.Rungs == nil && a.Rung != nil && a.Height != nil {
		a.Rungs, a.Heights = []int{*a.Rung}, []int{*a.Height}
	}
	return a, nil
}

// inLadder says whether a's rungs are distinct rungs of ladder at the heights the probe
// planned for them.
func (a renditionArgs) inLadder(ladder []encoder.Rendition) bool {
	if len(a.Rungs) == 0 || len(a.Rungs) != len(a.Heights) {
		return false
	}
	for i, rung := range a.Rungs {
		if rung < 0 || rung >= len(ladder) || ladder[rung].Height != a.Heights[i] || slices.Contains(a.Rungs[:i], rung) {
			return false
		}
	}
	return true
}

// source is a job's copy of its media's source, in a scratch directory of its own.
type source struct {
	path, scratch string
}

// fetchSource copies media id's uploaded source into a fresh scratch directory; the caller
// removes it (close).
func (e *Encode) fetchSource(ctx context.Context, id int64) (source, error) {
	var sourceKey *string
	if err := e.Pool.QueryRow(ctx, `SELECT source_key FROM media WHERE id = $1`, id).Scan(&sourceKey); err != nil {
		return source{}, fmt.Errorf("read media %d: %w", id, err)
	}
	if sourceKey == nil {
		return source{}, jobqueue.Permanent(jobqueue.WithReason(errors.New("media has no uploaded source"), "the upload is missing"))
	}
	scratch, err := os.MkdirTemp(e.ScratchDir, "playhead-encode-*")
	if err != nil {
		return source{}, err
	}
	src := source{path: filepath.Join(scratch, "source"), scratch: scratch}
	if err := e.fetch(ctx, *sourceKey, src.path); err != nil {
		src.close()
		return source{}, err
	}
	return src, nil
}

func (s source) close() { _ = os.RemoveAll(s.scratch) }

// produce is an encoding job's work: it fetches the media's source, has encode write the
// outputs into a scratch directory (its error worded for the uploader, encodeFailure), and
// uploads them under j's own prefix; it returns the prefix and the Discard that removes them.
func (e *Encode) produce(ctx context.Context, j jobqueue.Job, encode func(src, outDir string) error) (string, func(context.Context), error) {
	src, err := e.fetchSource(ctx, j.Subject)
	if err != nil {
		return "", nil, err
	}
	defer src.close()
	outDir := filepath.Join(src.scratch, "out")
	if err := encode(src.path, outDir); err != nil {
		if jobqueue.IsPermanent(err) {
			return "", nil, err
		}
		return "", nil, encodeFailure(err)
	}
	prefix := OutputPrefix(j.Subject, j.ClaimToken)
	discard := func(ctx context.Context) { _ = e.Store.DeletePrefix(ctx, prefix) }
	if err := storage.PutDir(ctx, e.Store, prefix, outDir); err != nil {
		discard(context.WithoutCancel(ctx))
		return "", nil, fmt.Errorf("store outputs: %w", err)
	}
	return prefix, discard, nil
}

// run is the encode job: with Single the whole encode, else the probe that plans the group.
func (e *Encode) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	if e.Single {
		return e.runWhole(ctx, j)
	}
	src, err := e.fetchSource(ctx, j.Subject)
	if err != nil {
		return jobqueue.Result{}, err
	}
	defer src.close()
	plan, err := e.Encoder.Plan(ctx, src.path)
	if err != nil {
		return jobqueue.Result{}, encodeFailure(err)
	}
	// The lowest rung's job (with the audio), the one that makes the media playable soonest,
	// is the group's only high-priority job: claimed before its siblings, and before the other
	// renditions of uploads of the same turn. The group takes this job's partition: its
	// owner's (media.JobPartition).
	attempts := cmp.Or(e.MaxAttempts, 3)
	var group []jobqueue.GroupJob
	var renditions []int
	for k, rungs := range encoder.SplitLadder(plan.Ladder, e.RenditionJobs) {
		heights := make([]int, len(rungs))
		for i, rung := range rungs {
			heights[i] = plan.Ladder[rung].Height
		}
		args, err := json.Marshal(renditionArgs{Rungs: rungs, Heights: heights, Audio: k == 0, Pictures: k == 0})
		if err != nil {
			return jobqueue.Result{}, err
		}
		priority := jobqueue.PriorityNormal
		if k == 0 {
			priority = jobqueue.PriorityHigh
		}
		renditions = append(renditions, len(group))
		group = append(group, jobqueue.GroupJob{Kind: KindRendition, Subject: j.Subject, Args: args, MaxAttempts: attempts, Priority: priority})
	}
	group = append(group, jobqueue.GroupJob{Kind: KindFinish, Subject: j.Subject, MaxAttempts: attempts, After: renditions})
	return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
		if err := media.PlanRenditions(ctx, tx, j.Subject, plan.Probe.DurationMS); err != nil {
			return err
		}
		// A media deleted while it was probed gets no rendition jobs: the probe just ends.
		if deleted, err := media.Deleted(ctx, tx, j.Subject); err != nil || deleted {
			return err
		}
		_, err := jobqueue.ContinueGroup(ctx, tx, j, group)
		return err
	}}, nil
}

// runRendition encodes its rungs of the group's ladder in one ffmpeg run and records their
// renditions in its completion.
func (e *Encode) runRendition(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	args, err := readRenditionArgs(j.Args)
	if err != nil {
		return jobqueue.Result{}, jobqueue.Permanent(fmt.Errorf("rendition job %d: args %q: %w", j.ID, j.Args, err))
	}
	var out encoder.RenditionOutput
	prefix, discard, err := e.produce(ctx, j, func(src, outDir string) error {
		plan, err := e.Encoder.Plan(ctx, src)
		if err != nil {
			return err
		}
		if !args.inLadder(plan.Ladder) {
			return jobqueue.Permanent(jobqueue.WithReason(fmt.Errorf("rendition job %d: rungs %v of %v pixels high are not in the ladder planned now (%d rungs)",
				j.ID, args.Rungs, args.Heights, len(plan.Ladder)), "the upload changed while it was being encoded; upload it again"))
		}
		out, err = e.Encoder.EncodeRenditions(ctx, src, outDir, plan, args.Rungs,
			encoder.RenditionOptions{Audio: args.Audio, Pictures: args.Pictures, Yield: !args.Pictures})
		return err
	})
	if err != nil {
		return jobqueue.Result{}, err
	}
	return jobqueue.Result{
		Commit: func(ctx context.Context, tx pgx.Tx) error {
			for _, part := range out.Parts {
				r := media.RecordedRendition{Folder: prefix, Part: part, StartUS: -1}
				if part.Video != nil {
					r.Name, r.StartUS = path.Dir(part.Video.URI), out.StartUS
				} else {
					r.Name = path.Dir(part.Audio.URI)
				}
				if err := media.RecordRendition(ctx, tx, j.Subject, r, map[string]any{"job_id": j.ID}); err != nil {
					return err
				}
			}
			if out.Thumbnail == "" {
				return nil
			}
			storyboard := ""
			if out.Storyboard != "" {
				storyboard = prefix + out.Storyboard
			}
			return media.RecordPictures(ctx, tx, j.Subject, prefix+out.Thumbnail, storyboard)
		},
		Discard: discard,
	}, nil
}

// runFinish makes the media READY once every rendition is done: the group's join, with
// nothing left to encode (the lowest rendition wrote the pictures).
func (e *Encode) runFinish(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
		return media.MarkRenditionsReady(ctx, tx, j.Subject, map[string]any{"job_id": j.ID})
	}}, nil
}

// runWhole is the encode of Single: every rendition, the thumbnail and the storyboard in one
// job, the media READY in its completion.
func (e *Encode) runWhole(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	var out encoder.Output
	prefix, discard, err := e.produce(ctx, j, func(src, outDir string) (err error) {
		out, err = e.Encoder.Encode(ctx, src, outDir)
		return err
	})
	if err != nil {
		return jobqueue.Result{}, err
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
