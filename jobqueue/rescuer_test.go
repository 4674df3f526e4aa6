package jobqueue_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// claimLastLeases claims every job of kind, each having lost all its leases but this one
// (jobqueue.DefaultMaxLostLeases − 1), and lets the leases run out, as when the worker holding
// them died.
func (b *bundle) claimLastLeases(t *testing.T, q *jobqueue.Queue, kind string) []jobqueue.Job {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `UPDATE jobs SET lost_count = $2 - 1 WHERE kind = $1`, kind, jobqueue.DefaultMaxLostLeases); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Claim(context.Background(), kind, 1000, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	b.expireLeases(t)
	return jobs
}

// A job that lost its last lease is swept to DEAD with its media FAILED and one notification,
// by however many nodes sweep at once; a job with leases left to lose is not the rescuer's.
func TestRescuer_SweepsEachExpiredLastLeaseOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mediaID := b.enqueue(t, "encode", 1)[0]
	b.enqueue(t, "encode", 1)
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"))
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lost_count = $2 - 1 WHERE subject_id = $1`, mediaID, jobqueue.DefaultMaxLostLeases); err != nil {
		t.Fatal(err)
	}
	if jobs, err := q.Claim(ctx, "encode", 2, "doomed"); err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %+v %v", jobs, err)
	}
	b.expireLeases(t)
	var wg sync.WaitGroup
	var swept atomic.Int32
	for range 4 {
		wg.Go(func() {
			jobs, err := jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Logger: quiet}).Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			swept.Add(int32(len(jobs)))
		})
	}
	wg.Wait()
	if swept.Load() != 1 {
		t.Fatalf("swept %d times, want exactly once", swept.Load())
	}
	m, _ := b.media.Get(ctx, mediaID)
	if m.Status != media.StatusFailed {
		t.Fatalf("media = %s, want FAILED", m.Status)
	}
	if n := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1`, mediaID); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE status = 'PROCESSING' AND attempt_count = 1`); n != 1 {
		t.Fatal("the expired job with leases left to lose was swept; the next claim should take it")
	}
}

// Expired jobs are swept with their own kind's hooks: a worker sweeping expired jobs of every
// kind with its own kind's hooks would mark, say, expired ingest jobs DEAD from the encode
// worker and leave their media PROCESSING forever with no notification.
// One rescuer runs each job's own kind's hooks, and leaves jobs of kinds it does not know
// alone (logged).
func TestRescuer_FailsTheMediaOfEveryKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	encodeMedia := b.enqueue(t, "encode", 10)
	ingestMedia := b.enqueue(t, "ingest", 10)
	mysteryMedia := b.enqueue(t, "mystery", 2)
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"), media.JobKind("ingest"))
	mystery := newQueue(t, b.pool, time.Minute, media.JobKind("mystery")) // a node of a newer version
	b.claimLastLeases(t, q, "encode")
	b.claimLastLeases(t, q, "ingest")
	b.claimLastLeases(t, mystery, "mystery")

	logs := &recordingHandler{}
	swept, err := jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Logger: slog.New(logs)}).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 20 {
		t.Errorf("swept %d jobs, want the 20 encode and ingest jobs", len(swept))
	}
	for _, id := range append(encodeMedia, ingestMedia...) {
		m, err := b.media.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		failed := b.count(t, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = $2`, id, media.OutboxFailed)
		if m.Status != media.StatusFailed || failed != 1 {
			t.Errorf("media %d after its job was swept DEAD: %s with %d failure notifications, want FAILED with 1", id, m.Status, failed)
		}
	}
	for _, id := range mysteryMedia {
		m, _ := b.media.Get(ctx, id)
		jobs := b.count(t, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND status = 'PROCESSING'`, id)
		if m.Status != media.StatusProcessing || jobs != 1 {
			t.Errorf("media %d of an unknown kind: %s with %d PROCESSING jobs, want both left alone", id, m.Status, jobs)
		}
	}
	if !logs.contains("does not know", "mystery") {
		t.Error("the expired jobs of the unknown kind were not logged")
	}
}

// recordingHandler keeps every log record's message and attributes.
type recordingHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

// contains reports whether one line holds every part.
func (h *recordingHandler) contains(parts ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
next:
	for _, l := range h.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		return true
	}
	return false
}

// A job whose kind's Fail hook keeps failing (its domain row is gone, a constraint refuses the
// write) stays PROCESSING for the next sweep, and the sweep goes on to the other expired jobs:
// a sweep that returned at the first failure would let one such job, the oldest expired
// lease, keep every node's rescuer from ever sweeping the jobs behind it.
func TestRescuer_OneFailingHookDoesNotStopTheSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	brittle := media.JobKind("brittle")
	brittle.Fail = func(context.Context, pgx.Tx, jobqueue.Job, error) error {
		return errors.New("the domain refuses the write")
	}
	brittleMedia := b.enqueue(t, "brittle", 1)[0]
	encodeMedia := b.enqueue(t, "encode", 5)
	q := newQueue(t, b.pool, time.Minute, media.JobKind("encode"), brittle)
	b.claimLastLeases(t, q, "brittle")
	b.claimLastLeases(t, q, "encode")
	// The brittle job's lease ran out first, so it comes first in the sweep's order.
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET lease_until = lease_until - interval '1 hour' WHERE kind = 'brittle'`); err != nil {
		t.Fatal(err)
	}

	swept, err := jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Logger: quiet}).Sweep(ctx)
	if err == nil || !strings.Contains(err.Error(), "the domain refuses the write") {
		t.Errorf("sweep error = %v, want the brittle job's hook error reported", err)
	}
	if len(swept) != len(encodeMedia) {
		t.Errorf("swept %d jobs, want the %d encode jobs behind the brittle one", len(swept), len(encodeMedia))
	}
	for _, id := range encodeMedia {
		if m, _ := b.media.Get(ctx, id); m.Status != media.StatusFailed {
			t.Errorf("media %d: %s, want FAILED (its job lost its last lease)", id, m.Status)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND status = 'PROCESSING'`, brittleMedia); n != 1 {
		t.Error("the job whose Fail hook failed was not left PROCESSING for the next sweep")
	}
}
