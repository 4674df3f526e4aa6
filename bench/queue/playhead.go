package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// playhead is Playhead's queue as cmd/api runs it: a jobqueue.Runner with its defaults (1 min
// lease, 5 ms completion window), one kind whose Run does nothing. Without media hooks the
// kind has no domain writes, as River's no-op worker has none, and its completions are
// batched. With them (media.JobKind, the hooks of the encode and ingest kinds) each job is
// about a media row of its own, with an owner of its own, and finishes in its own fenced
// transaction that locks the owner and the media first: what Playhead's own kinds cost.
type playhead struct {
	pool  *pgxpool.Pool
	media bool
}

func newPlayhead(ctx context.Context, cfg Config, withMedia bool) (*playhead, error) {
	name := "bench_playhead"
	if withMedia {
		name += "_media"
	}
	url, err := createDatabase(ctx, cfg.URL, name)
	if err != nil {
		return nil, fmt.Errorf("playhead database: %w", err)
	}
	if err := migratePlayhead(ctx, url); err != nil {
		return nil, fmt.Errorf("playhead migrations: %w", err)
	}
	pool, err := openPool(ctx, url, cfg.MaxConns)
	if err != nil {
		return nil, err
	}
	return &playhead{pool: pool, media: withMedia}, nil
}

func (p *playhead) close() { p.pool.Close() }

func (p *playhead) run(ctx context.Context, jobs, workers int) (time.Duration, error) {
	if _, err := p.pool.Exec(ctx, `TRUNCATE jobs, notification_outbox, media, members CASCADE`); err != nil {
		return 0, err
	}
	if p.media {
		if _, err := p.pool.Exec(ctx, `INSERT INTO members (id) SELECT g FROM generate_series(1, $1::bigint) AS g`, jobs); err != nil {
			return 0, err
		}
		if _, err := p.pool.Exec(ctx, `
			INSERT INTO media (owner_id, title, status, visibility)
			SELECT g, 'bench', 'PROCESSING', 'PRIVATE' FROM generate_series(1, $1::bigint) AS g`, jobs); err != nil {
			return 0, err
		}
	}
	subjects := `SELECT g FROM generate_series(1, $1::bigint) AS g`
	if p.media {
		subjects = `SELECT id FROM media LIMIT $1`
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO jobs (kind, subject_id, max_attempts) SELECT 'noop', s, 3 FROM (`+subjects+`) AS subject(s)`, jobs); err != nil {
		return 0, err
	}
	// A live queue's statistics are kept by autovacuum; a table that grew by thousands of
	// rows a moment ago has none yet.
	if _, err := p.pool.Exec(ctx, `VACUUM ANALYZE jobs, media, members`); err != nil {
		return 0, err
	}

	var ran atomic.Int64
	kind := jobqueue.Kind{Name: "noop"}
	if p.media {
		kind = media.JobKind("noop")
	}
	kind.Run = func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
		ran.Add(1)
		return jobqueue.Result{}, nil
	}
	q, err := jobqueue.NewQueue(p.pool, time.Minute, kind)
	if err != nil {
		return 0, err
	}
	warnings := &warningCounter{}
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: "noop", Node: "bench", Concurrency: workers,
		Logger: slog.New(warnings)})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := r.Start(ctx); err != nil {
		return 0, err
	}
	err = waitUntil(ctx, 5*time.Minute, func(ctx context.Context) (bool, error) {
		var busy bool
		err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'PENDING')
		                                 OR EXISTS (SELECT 1 FROM jobs WHERE status = 'PROCESSING')`).Scan(&busy)
		return !busy, err
	})
	elapsed := time.Since(start)
	if stopErr := r.Stop(ctx); err == nil {
		err = stopErr
	}
	if err != nil {
		return 0, err
	}
	var completed, again int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE attempt_count <> 1) FROM jobs`).
		Scan(&completed, &again); err != nil {
		return 0, err
	}
	if completed != jobs || again != 0 || ran.Load() != int64(jobs) || warnings.n.Load() != 0 {
		return 0, fmt.Errorf("%d of %d jobs completed, %d ran, %d took another attempt, %d warnings logged",
			completed, jobs, ran.Load(), again, warnings.n.Load())
	}
	return elapsed, nil
}

// warningCounter is a slog handler that counts warnings and errors: a no-op job must never
// be retried, lose its claim or fail to complete.
type warningCounter struct{ n atomic.Int64 }

func (h *warningCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *warningCounter) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *warningCounter) WithGroup(string) slog.Handler                { return h }
func (h *warningCounter) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
