package jobqueue_test

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

// The queue's benchmarks, recorded in docs/benchmarks/ (the job-queue and claim runs). They run only with
// -bench; b.N is the number of jobs (throughput) or of enqueue→start samples (latency), so
// give each an explicit -benchtime, e.g.:
//
//	go test -run '^$' -bench 'BenchmarkRunner_NoopThroughput' -benchtime 2000x -count 3 ./jobqueue
//	go test -run '^$' -bench 'BenchmarkRunner_IdleStartLatency/notify' -benchtime 200x -count 3 ./jobqueue
//	go test -run '^$' -bench 'BenchmarkRunner_IdleStartLatency/poll-only' -benchtime 30x -count 3 ./jobqueue
//	go test -run '^$' -bench 'BenchmarkClaim_Backlog' -benchtime 2000x -count 3 ./jobqueue

// benchPool returns a pool on a fresh migrated database sized like a worker node's
// (cmd/api/serve.go: concurrency + 2 connections), and the database's URL.
func benchPool(b *testing.B, maxConns int) (*pgxpool.Pool, string) {
	b.Helper()
	url := pgtest.URL(b)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool, url
}

// benchMedia inserts n members and n PROCESSING media, one per member, in one statement each,
// and returns the first media id (the ids are consecutive). Every job gets its own media and
// owner, as distinct uploads do, so the fenced completion's members → media row locks measure
// the queue rather than contention on one shared row.
func benchMedia(b *testing.B, pool *pgxpool.Pool, n int) int64 {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO members (id) SELECT g FROM generate_series(1, $1::bigint) AS g`, n); err != nil {
		b.Fatal(err)
	}
	var first int64
	err := pool.QueryRow(ctx, `
		WITH m AS (
			INSERT INTO media (owner_id, title, status, visibility)
			SELECT g, 'bench', 'PROCESSING', 'PRIVATE' FROM generate_series(1, $1::bigint) AS g
			RETURNING id)
		SELECT min(id) FROM m`, n).Scan(&first)
	if err != nil {
		b.Fatal(err)
	}
	return first
}

// failOnWarnings is a slog handler that records the first warning or error a worker logs:
// a no-op job must never be retried, lose its claim or fail to complete.
type failOnWarnings struct {
	mu    *sync.Mutex
	first *string
}

func newFailOnWarnings() failOnWarnings {
	return failOnWarnings{mu: new(sync.Mutex), first: new(string)}
}

func (h failOnWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h failOnWarnings) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h failOnWarnings) WithGroup(string) slog.Handler                { return h }
func (h failOnWarnings) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *h.first == "" {
		msg := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		*h.first = msg
	}
	return nil
}

func (h failOnWarnings) check(b *testing.B) {
	b.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if *h.first != "" {
		b.Fatalf("the runner logged: %s", *h.first)
	}
}

// BenchmarkRunner_NoopThroughput runs b.N no-op jobs, enqueued before the timer starts, on one
// worker with 1, 4 or 16 slots, and reports completed jobs per second. Each job costs one
// share of a claim statement and one fenced completion transaction (BEGIN, owner lookup,
// members and media row locks, the fenced UPDATE, COMMIT). The figure depends on b.N: the
// whole backlog is there from the start, and the claim statement sorts every due job on each
// call, so compare runs only at the same -benchtime.
func BenchmarkRunner_NoopThroughput(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			benchmarkNoopThroughput(b, workers)
		})
	}
}

func benchmarkNoopThroughput(b *testing.B, workers int) {
	ctx := context.Background()
	pool, _ := benchPool(b, workers+2)
	first := benchMedia(b, pool, b.N)
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (kind, subject_id, max_attempts)
		SELECT 'noop', g, 3 FROM generate_series($1::bigint, $1::bigint + $2::bigint - 1) AS g`, first, b.N); err != nil {
		b.Fatal(err)
	}
	// Autovacuum would have analysed a table that grew this much by the time a real backlog is
	// worked off; do it now so the claim's plan is the one a live queue gets.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE jobs, media, members`); err != nil {
		b.Fatal(err)
	}

	var runs atomic.Int64
	allRun := make(chan struct{})
	n := int64(b.N)
	kind := mediaKind("noop", func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		if runs.Add(1) == n {
			close(allRun)
		}
		return jobqueue.Result{}, nil
	})
	logs := newFailOnWarnings()
	w, err := jobqueue.NewRunner(newQueue(b, pool, time.Minute, kind), jobqueue.RunnerConfig{
		Kind: "noop", Node: "bench", Concurrency: workers, Logger: slog.New(logs),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Stop(ctx) })

	b.ResetTimer()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-allRun:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d jobs ran within 10 minutes", runs.Load(), b.N)
	}
	// Every job has run; the last few completions may still be in flight. Both partial indexes
	// make this probe cheap, and only the tail of the run pays for it.
	for {
		var busy bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'PROCESSING')
		                              OR EXISTS (SELECT 1 FROM jobs WHERE status = 'PENDING')`).Scan(&busy)
		if err != nil {
			b.Fatal(err)
		}
		if !busy {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")

	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	logs.check(b)
	var completed, extra int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE attempt_count <> 1) FROM jobs`).
		Scan(&completed, &extra); err != nil {
		b.Fatal(err)
	}
	if completed != b.N || extra != 0 || runs.Load() != n {
		b.Fatalf("%d of %d jobs completed, %d ran, %d took other than one attempt", completed, b.N, runs.Load(), extra)
	}
}

// BenchmarkRunner_IdleStartLatency measures, on an idle worker polling every second, the time
// from the enqueuing transaction's COMMIT (taken just before it is sent, so the commit's own
// round trip and WAL flush count) to the start of the job's Run, over b.N jobs enqueued one at
// a time with jobqueue.Enqueue. "notify" wires a notify.Listener to Wake as cmd/api does;
// "poll-only" has no listener, so a job waits for the next 1 s poll. The pause between jobs is
// random — up to 20 ms with NOTIFY, up to a whole poll interval without, so that enqueues land
// at a uniformly random phase of the poll ticker. It reports p50, p99 and max in ms.
func BenchmarkRunner_IdleStartLatency(b *testing.B) {
	b.Run("notify", func(b *testing.B) { benchmarkIdleStartLatency(b, true) })
	b.Run("poll-only", func(b *testing.B) { benchmarkIdleStartLatency(b, false) })
}

func benchmarkIdleStartLatency(b *testing.B, withNotify bool) {
	const pollInterval = time.Second
	ctx := context.Background()
	pool, url := benchPool(b, 3)
	first := benchMedia(b, pool, b.N)

	started := make(chan time.Time, 1)
	kind := mediaKind("noop", func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		started <- time.Now()
		return jobqueue.Result{}, nil
	})
	logs := newFailOnWarnings()
	w, err := jobqueue.NewRunner(newQueue(b, pool, time.Minute, kind), jobqueue.RunnerConfig{
		Kind: "noop", Node: "bench", PollInterval: pollInterval, Logger: slog.New(logs),
	})
	if err != nil {
		b.Fatal(err)
	}
	if withNotify {
		connected := make(chan struct{}, 1)
		startListener(b, url, jobqueue.Channel, func(string) { w.Wake() }, func() {
			w.Wake()
			select {
			case connected <- struct{}{}:
			default:
			}
		})
		<-connected
	}
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Stop(ctx) })

	maxPause := 20 * time.Millisecond
	if !withNotify {
		maxPause = pollInterval
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		time.Sleep(rand.N(maxPause))
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := jobqueue.Enqueue(ctx, tx, "noop", first+int64(i), 3); err != nil {
			b.Fatal(err)
		}
		commit := time.Now()
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case start := <-started:
			samples = append(samples, start.Sub(commit))
		case <-time.After(30 * time.Second):
			b.Fatalf("job %d did not start within 30 s", i)
		}
		// Wait for the completion too, so the next job finds the worker idle again.
		for {
			var done bool
			if err := pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE status = 'PROCESSING')`).Scan(&done); err != nil {
				b.Fatal(err)
			}
			if done {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	logs.check(b)

	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(samples, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(samples, 99)), "p99-ms")
	b.ReportMetric(ms(samples[len(samples)-1]), "max-ms")
	b.ReportMetric(0, "ns/op") // the loop's time is mostly the random pauses: not a figure
	if testing.Verbose() {
		b.Log("samples:", samples)
	}
}

// percentile returns the nearest-rank p-th percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// BenchmarkClaim_Backlog measures one claim call with 100 000 encode jobs queued (due,
// PENDING, consecutive ids): "idle-kind" polls a kind with nothing queued (what every ingest
// poller does on every node while the encoders have a backlog), "busy-kind" claims one encode
// job and gives it back (Release), so each iteration sees the same backlog. ns/op is one
// claim call's round trip and execution.
func BenchmarkClaim_Backlog(b *testing.B) {
	const backlog = 100_000
	ctx := context.Background()
	pool, _ := benchPool(b, 2)
	first := benchMedia(b, pool, backlog)
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (kind, subject_id, max_attempts)
		SELECT 'encode', g, 3 FROM generate_series($1::bigint, $1::bigint + $2::bigint - 1) AS g`, first, backlog); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE jobs`); err != nil {
		b.Fatal(err)
	}
	q := newQueue(b, pool, time.Minute, mediaKind("encode", nil), mediaKind("ingest", nil))
	b.Run("idle-kind", func(b *testing.B) {
		for b.Loop() {
			jobs, err := q.Claim(ctx, "ingest", 1, "bench")
			if err != nil || len(jobs) != 0 {
				b.Fatalf("claim: %v %v", jobs, err)
			}
		}
	})
	b.Run("busy-kind", func(b *testing.B) {
		for b.Loop() {
			jobs, err := q.Claim(ctx, "encode", 1, "bench")
			if err != nil || len(jobs) != 1 {
				b.Fatalf("claim: %v %v", jobs, err)
			}
			b.StopTimer()
			if err := q.Release(ctx, jobs[0]); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
