package jobqueue_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// commitMessage is how pgx sends COMMIT: a simple-protocol Query message ('Q', its length,
// the text and a NUL).
var commitMessage = append([]byte{'Q', 0, 0, 0, 11}, "commit\x00"...)

// A failed completion is not proof that the COMMIT failed. When the COMMIT reaches the server
// but the client sees an error (a reset connection, a timeout), the job is COMPLETED and the
// media READY; a runner that deleted the run's outputs then would leave the media pointing at
// deleted files, and nothing would retry it. Here the proxy lets the completion's COMMIT
// through and resets the connection before the answer comes back. The runner must read what the database holds before deleting anything,
// and keep the files when it cannot read that either.
func TestRunner_AmbiguousCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// settleFails keeps the database unreachable for new connections after the cut, so
		// the runner's read of the outcome fails too.
		settleFails bool
		outcome     string
	}{
		{"SettledCommittedKeepsTheOutputs", false, "completed"},
		{"UnknownOutcomeKeepsTheOutputs", true, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			mediaID := b.enqueue(t, "render", 1)[0]
			// One connection: the completion runs on the one the claim opened, and the outcome
			// read needs a new one.
			pool, proxy := b.proxiedPool(t, 1)
			dir := t.TempDir()
			kind := mediaKind("render", func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
				out := filepath.Join(dir, j.ClaimToken) // unique to the claim, as encode's prefix
				if err := os.WriteFile(out, []byte("segment"), 0o644); err != nil {
					return jobqueue.Result{}, err
				}
				if tc.settleFails {
					proxy.Refuse(true)
				}
				return jobqueue.Result{
					Commit: func(ctx context.Context, tx pgx.Tx) error {
						return media.MarkReady(ctx, tx, j.Subject, media.Encoded{HLSKey: out, ThumbnailKey: out, DurationMS: 1000}, nil)
					},
					Discard: func(context.Context) { _ = os.Remove(out) },
				}, nil
			})
			cut := proxy.CutAfter(commitMessage)
			q := newQueue(t, pool, time.Minute, kind)
			// The metrics' scrape-time queries go through the test's own pool, not the proxy.
			reg := prometheus.NewRegistry()
			metrics := jobqueue.NewMetrics(reg, newQueue(t, b.pool, time.Minute, kind))
			startRunner(t, q, jobqueue.RunnerConfig{Kind: "render", Node: "n", PollInterval: 10 * time.Millisecond, Metrics: metrics})
			receive(t, cut, "the cut after the completion's COMMIT")
			waitFor(t, "the job's outcome", func() bool { return outcomes(t, reg, "render") > 0 })
			if got := outcome(t, reg, "render", tc.outcome); got != 1 {
				t.Errorf("outcome %s counted %v times, want 1", tc.outcome, got)
			}
			proxy.Refuse(false)

			m, err := b.media.Get(context.Background(), mediaID)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != media.StatusReady {
				t.Fatalf("media = %s, want READY (the COMMIT went through)", m.Status)
			}
			if _, err := os.Stat(m.HLSKey); err != nil {
				t.Fatalf("the READY media's output: %v (deleted after a completion that committed)", err)
			}
			if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'COMPLETED' AND attempt_count = 1`); n != 1 {
				t.Fatalf("%d jobs COMPLETED on their first attempt, want 1", n)
			}
		})
	}
}

// outcome reads playhead_jobs_outcomes_total for kind and outcome from reg.
func outcome(t *testing.T, reg *prometheus.Registry, kind, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "playhead_jobs_outcomes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && (outcome == "" || labels["outcome"] == outcome) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// outcomes is the number of jobs of kind that ended, however.
func outcomes(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	return outcome(t, reg, kind, "")
}
