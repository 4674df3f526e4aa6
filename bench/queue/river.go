package queue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's fetch settings. The defaults (100 ms cooldown, 1 s poll) cap a single worker at about
// 10 jobs/s, so no one who cares about throughput keeps them: 1 ms is River's minimum cooldown
// (and the reference setting of this comparison), 20 ms the poll interval of River's own
// benchmark (cmd/river/riverbench). Everything else is River's default: the batch completer,
// the LISTEN/NOTIFY notifier, leader election and the maintenance services.
const (
	riverFetchCooldown     = time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// riverQueue is River v0.51.2 with the pgx v5 driver, on a database migrated by rivermigrate.
type riverQueue struct {
	pool *pgxpool.Pool
}

func newRiver(ctx context.Context, cfg Config) (*riverQueue, error) {
	url, err := createDatabase(ctx, cfg.URL, "bench_river")
	if err != nil {
		return nil, fmt.Errorf("river database: %w", err)
	}
	pool, err := openPool(ctx, url, cfg.MaxConns)
	if err != nil {
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	return &riverQueue{pool: pool}, nil
}

func (r *riverQueue) close() { r.pool.Close() }

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	ran *atomic.Int64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.ran.Add(1)
	return nil
}

func (r *riverQueue) run(ctx context.Context, jobs, workers int) (time.Duration, error) {
	if _, err := r.pool.Exec(ctx, `TRUNCATE river_job`); err != nil {
		return 0, err
	}
	var ran atomic.Int64
	registry := river.NewWorkers()
	river.AddWorker(registry, &noopWorker{ran: &ran})
	client, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           registry,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return 0, err
	}
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	if _, err := client.InsertManyFast(ctx, params); err != nil {
		return 0, err
	}
	if _, err := r.pool.Exec(ctx, `VACUUM ANALYZE river_job`); err != nil {
		return 0, err
	}

	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	err = waitUntil(ctx, 5*time.Minute, func(ctx context.Context) (bool, error) {
		var busy bool
		err := r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE state IN ('available', 'running'))`).Scan(&busy)
		return !busy, err
	})
	elapsed := time.Since(start)
	if stopErr := client.Stop(ctx); err == nil {
		err = stopErr
	}
	if err != nil {
		return 0, err
	}
	var completed, again int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE attempt <> 1) FROM river_job`).
		Scan(&completed, &again); err != nil {
		return 0, err
	}
	if completed != jobs || again != 0 || ran.Load() != int64(jobs) {
		return 0, fmt.Errorf("%d of %d jobs completed, %d ran, %d took another attempt", completed, jobs, ran.Load(), again)
	}
	return elapsed, nil
}
