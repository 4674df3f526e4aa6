package encodejobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// Edge cases of rendition jobs split by encoder.SplitLadder, args {"rungs", "heights", "audio",
// "pictures"}.

// jobAttempt is a job's status, attempts and last error.
func (f *groupFixture) jobAttempt(t *testing.T, id int64) (status string, attempts int, lastError string) {
	t.Helper()
	if err := f.b.pool.QueryRow(context.Background(), `SELECT status, attempt_count, coalesce(last_error, '') FROM jobs WHERE id = $1`, id).
		Scan(&status, &attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	return status, attempts, lastError
}

// A rendition job whose args are not a set of rungs of the ladder the source gives now (stale,
// hand-edited, hostile) must fail for good at its first attempt, failing the media with its
// reason: retrying it cannot help, and every attempt downloads and probes the source again.
// The lowest rung's job (rungs [2], heights [240] for the fixture's 480p source) gets each
// args; the other rendition job is held back so that nothing else encodes.
//
// "a rung twice" needs inLadder to refuse a rung twice: were inLadder to accept [2, 2],
// EncodeRenditions would refuse it with a plain error, which encodeFailure makes retryable, so
// the job would be tried PLAYHEAD_JOB_MAX_ATTEMPTS times (each fetching and probing the source)
// before it died, with "the video could not be encoded; an administrator can see why and retry
// it" (a retry that can never succeed). "heights of another ladder" is the check mutation
// "inLadder ignores the heights" breaks: no other test has a stale height.
func TestEncodeGroupReview_RenditionArgsNotInTheLadderFailAtTheFirstAttempt(t *testing.T) {
	t.Parallel()
	const staleReason = "the upload changed while it was being encoded; upload it again"
	for _, tc := range []struct {
		name, args string
		reason     string // the media's failure_reason, when the test names one
	}{
		{name: "heights of another ladder", args: `{"rungs":[2],"heights":[360],"audio":true,"pictures":true}`, reason: staleReason},
		{name: "the highest rung at the lowest's height", args: `{"rungs":[0],"heights":[240],"audio":true,"pictures":true}`, reason: staleReason},
		{name: "more heights than rungs", args: `{"rungs":[2],"heights":[240,360],"audio":true,"pictures":true}`},
		{name: "more rungs than heights", args: `{"rungs":[2,1],"heights":[240],"audio":true,"pictures":true}`},
		{name: "no rung", args: `{"rungs":[],"heights":[],"audio":true,"pictures":true}`},
		{name: "a rung past the ladder", args: `{"rungs":[3],"heights":[240],"audio":true,"pictures":true}`},
		{name: "a negative rung", args: `{"rungs":[-1],"heights":[240],"audio":true,"pictures":true}`},
		{name: "not an object", args: `[2]`},
		{name: "a rung twice", args: `{"rungs":[2,2],"heights":[240,240],"audio":true,"pictures":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newGroupFixture(t, 0)
			ctx := context.Background()
			ids := f.probed(t, 2)
			target := ids[0]
			if _, err := f.b.pool.Exec(ctx, `UPDATE jobs SET args = $2::jsonb WHERE id = $1`, target, tc.args); err != nil {
				t.Fatal(err)
			}
			if _, err := f.b.pool.Exec(ctx, `UPDATE jobs SET available_at = statement_timestamp() + interval '1 day' WHERE id = ANY($1)`, ids[1:]); err != nil {
				t.Fatal(err)
			}
			startRunner(t, f.b, f.kinds[1])
			waitFor(t, "the rendition job's first attempt to end", func() bool {
				status, attempts, _ := f.jobAttempt(t, target)
				return status == "DEAD" || status == "COMPLETED" || status == "PENDING" && attempts > 0
			})
			status, attempts, lastError := f.jobAttempt(t, target)
			if status != "DEAD" || attempts != 1 {
				t.Fatalf("rendition job with args %s: %s after %d attempt(s) (%s), want DEAD after its first", tc.args, status, attempts, lastError)
			}
			m, err := f.b.media.Get(ctx, f.media)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != media.StatusFailed || m.Playable || tc.reason != "" && m.FailureReason != tc.reason {
				t.Errorf("media after the job died: %s (playable %v) %q, want FAILED, not playable, %q", m.Status, m.Playable, m.FailureReason, tc.reason)
			}
		})
	}
}

// A rendition job in the older shape, args {"rung": N, "height": H, "audio", "pictures"} (one job
// per rung, as the previous version enqueues them), that a worker of this version claims: the case
// of every upload whose probe completed before a rolling restart (docs/operations/clusters.md,
// TestCluster_RollingRestart) and whose renditions run after it. Its rung is in the ladder planned
// now, so it should be encoded and the group finish READY.
//
// readRenditionArgs reads the old shape: decoded as the new one, the old args would have no
// rungs (json ignores "rung" and "height"), inLadder would be false, and the job would die at
// its first attempt with the permanent reason "the upload changed while it was being encoded;
// upload it again": nothing changed but the code, and the owner would be told media.failed and
// to upload again. (The other way round, a worker of the old version claiming a job of this
// one, decodes rung 0 at height 0 and fails the media with the same reason; a test of this
// version cannot show that.)
func TestEncodeGroupReview_ARenditionJobOfThePreviousVersionIsEncodedNotFailed(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 3) // a job per rung, as the previous version enqueued them
	ctx := context.Background()
	f.probed(t, 3)
	if _, err := f.b.pool.Exec(ctx, `
		UPDATE jobs SET args = jsonb_build_object('rung', (args->'rungs'->>0)::int, 'height', (args->'heights'->>0)::int,
		                                          'audio', args->'audio', 'pictures', args->'pictures')
		WHERE kind = $1 AND subject_id = $2`, encodejobs.KindRendition, f.media); err != nil {
		t.Fatal(err)
	}
	startRunner(t, f.b, f.kinds[1])
	startRunner(t, f.b, f.kinds[2])
	waitFor(t, "READY or FAILED", func() bool {
		m, err := f.b.media.Get(ctx, f.media)
		return err == nil && (m.Status == media.StatusReady || m.Status == media.StatusFailed)
	})
	m, _ := f.b.media.Get(ctx, f.media)
	if m.Status != media.StatusReady {
		rows, _ := f.b.pool.Query(ctx, `SELECT args::text || ' ' || status || ' ' || coalesce(last_error, '') FROM jobs WHERE kind = $1 AND subject_id = $2 ORDER BY id`,
			encodejobs.KindRendition, f.media)
		jobs, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		t.Fatalf("media with rendition jobs of the previous args shape: %s %q, want READY; its rendition jobs:\n\t%s",
			m.Status, m.FailureReason, strings.Join(jobs, "\n\t"))
	}
	if n := strings.Count(f.probeMaster(t), "#EXT-X-STREAM-INF"); n != 3 {
		t.Errorf("the master lists %d variants, want 3", n)
	}
}

// With the default split (the 240p alone, then 480p + 360p in one job), the multi-rung job
// dies (an administrator cancels it): the media FAILED, the finish cancelled, the 240p and its
// audio kept (rows, and folders the orphan sweep keeps). The administrator's retry of that job
// encodes both its rungs, records a row for each, in its own claim's folder, and the group
// finishes READY with the three renditions, the 240p not encoded again.
func TestEncodeGroupReview_TheRetryOfADeadMultiRungJobFinishesTheGroup(t *testing.T) {
	t.Parallel()
	f := newGroupFixture(t, 0)
	ctx := context.Background()
	ids := f.probed(t, 2)
	lowest, others := ids[0], ids[1]
	if err := f.queue.Cancel(ctx, others); err != nil {
		t.Fatal(err)
	}
	startRunner(t, f.b, f.kinds[1])
	startRunner(t, f.b, f.kinds[2])
	waitFor(t, "the 240p", func() bool {
		status, _, _ := f.jobAttempt(t, lowest)
		return status == "COMPLETED"
	})
	m, _ := f.b.media.Get(ctx, f.media)
	if m.Status != media.StatusFailed || m.FailureReason != jobqueue.CancelReason {
		t.Fatalf("media after its multi-rung job died: %s %q, want FAILED with the job's reason", m.Status, m.FailureReason)
	}
	if got := f.finishStatus(t); got != "DEAD" {
		t.Fatalf("finish %s, want DEAD with its parent", got)
	}
	names := func() map[string]string {
		rows, err := f.b.pool.Query(ctx, `SELECT name, folder FROM media_renditions WHERE media_id = $1`, f.media)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var name, folder string
		if _, err := pgx.ForEachRow(rows, []any{&name, &folder}, func() error { out[name] = folder; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	kept := names()
	if len(kept) != 2 || kept["v2"] == "" || kept["audio"] != kept["v2"] {
		t.Fatalf("rows kept %v, want v2 and audio in the 240p job's folder", kept)
	}
	inUse, err := encodejobs.OrphanRules(f.b.pool)[0].InUse(ctx, []string{kept["v2"]})
	if err != nil {
		t.Fatal(err)
	}
	if !inUse[kept["v2"]] {
		t.Errorf("the orphan sweep would remove %s, the kept 240p's folder", kept["v2"])
	}

	if err := f.queue.RetryDead(ctx, others); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "READY after the retry", func() bool {
		m, err := f.b.media.Get(ctx, f.media)
		return err == nil && m.Status == media.StatusReady
	})
	all := names()
	if len(all) != 4 || all["v0"] == "" || all["v0"] != all["v1"] || all["v0"] == all["v2"] || all["v2"] != kept["v2"] {
		t.Errorf("rows after the retry %v, want v0 and v1 in the retried job's folder, v2 and audio as kept", all)
	}
	if n := strings.Count(f.probeMaster(t), "#EXT-X-STREAM-INF"); n != 3 {
		t.Errorf("the master after the retry lists %d variants, want 3", n)
	}
	if _, attempts, _ := f.jobAttempt(t, lowest); attempts != 1 {
		t.Errorf("the 240p's job ran %d times, want once", attempts)
	}
}
