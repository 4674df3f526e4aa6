package mediadelete_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/mediadelete"
	"github.com/playhead/playhead/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// quiet keeps the expected retries out of the test output unless -v.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))

// exec runs statements on pool, failing the test on the first error.
func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// count runs a count query.
func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// deleteMedia runs mediadelete.Delete in a transaction of its own.
func deleteMedia(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return mediadelete.Delete(ctx, tx, id) })
}

// startDeletions runs deletion jobs on objects until the test ends, with metrics in reg.
func startDeletions(t *testing.T, pool *pgxpool.Pool, objects storage.Store, reg prometheus.Registerer) {
	t.Helper()
	kind := (&mediadelete.Job{Pool: pool, Objects: objects, Metrics: mediadelete.NewMetrics(reg)}).Kind()
	q, err := jobqueue.NewQueue(pool, time.Minute, kind)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: kind.Name, Node: "n", PollInterval: 20 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryCap: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
}

// waitUntil polls cond until it holds; the test's own timeout is the only limit.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// deletionDone waits for media id's deletion job to be COMPLETED.
func deletionDone(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	for {
		var status, lastError string
		err := pool.QueryRow(context.Background(), `SELECT status, coalesce(last_error, '') FROM jobs WHERE kind = $1 AND subject_id = $2`,
			mediadelete.KindDelete, id).Scan(&status, &lastError)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case status == "COMPLETED":
			return
		case status == "DEAD":
			t.Fatalf("the deletion job is DEAD: %s", lastError)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for the deletion job: %s, last error %q", status, lastError)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// keys lists every object of st.
func keys(t *testing.T, st storage.Store) []string {
	t.Helper()
	var out []string
	for o, err := range st.List(context.Background(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// under reports the keys that start with one of prefixes.
func under(keys []string, prefixes ...string) []string {
	var out []string
	for _, k := range keys {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}
