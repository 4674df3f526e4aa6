package dbpool_test

// WaitReachable and CloseBy against a real PostgreSQL behind a fault proxy: their own tests,
// apart from those of cmd/api that use them.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// proxied returns a pool on a test database through a fault proxy, and the database's own URL.
func proxied(t *testing.T) (*faultproxy.Proxy, *pgxpool.Pool, string) {
	t.Helper()
	direct := pgtest.URL(t)
	proxy, pool := pgtest.ProxiedPool(t, direct)
	return proxy, pool, direct
}

// logLines is a slog handler that sends every message it is given to its channel.
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default: // nobody reading: the test has what it needs
	}
	return nil
}
func (l logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logLines) WithGroup(string) slog.Handler      { return l }

// A database that refuses connections is waited for, however many pings it refuses, until it
// accepts; a cancelled wait ends with an error.
func TestWaitReachable_WaitsForARefusingDatabase(t *testing.T) {
	proxy, pool, _ := proxied(t)
	defer pool.Close()
	for _, cancelled := range []bool{false, true} {
		proxy.Refuse(true)
		proxy.ResetAll()
		lines := make(logLines, 16)
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error, 1)
		go func() { result <- dbpool.WaitReachable(ctx, pool, "DATABASE_URL", slog.New(lines)) }()
		for range 2 {
			if line := <-lines; line != "waiting for database" {
				t.Fatalf("logged %q while the database refused, want waiting for database", line)
			}
		}
		select {
		case err := <-result:
			t.Fatalf("WaitReachable returned %v while the database still refused connections", err)
		default:
		}
		if cancelled {
			cancel()
			if err := <-result; err == nil {
				t.Error("WaitReachable on a refusing database with a cancelled context: nil")
			}
			continue
		}
		proxy.Refuse(false)
		if err := <-result; err != nil {
			t.Errorf("WaitReachable: %v, want nil once the database accepts", err)
		}
		cancel()
	}
	proxy.Refuse(false)
}

// CloseBy returns at its deadline, saying so, while a connection cannot close (a partitioned
// database with a cancelled query in flight: pgx waits up to 15 s for it); the partition ends
// only after CloseBy returned, so a CloseBy that waited for the pool would not say it.
func TestCloseBy_ReturnsAtTheDeadline(t *testing.T) {
	proxy, pool, direct := proxied(t)
	ctx := context.Background()
	watcher, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	queryCtx, cancelQuery := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = pool.Exec(queryCtx, `SELECT pg_sleep(30)`)
	}()
	for running := 0; running == 0; {
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep(30)'`).Scan(&running); err != nil {
			t.Fatal(err)
		}
	}
	// The query is running; now the database stops answering, and its cancel cannot reach it.
	proxy.Partition()
	cancelQuery()
	lines := make(logLines, 16)
	dbpool.CloseBy(pool, time.Now().Add(200*time.Millisecond), slog.New(lines))
	select {
	case line := <-lines:
		if line != "database connections still closing at the stop deadline; exiting without waiting for them" {
			t.Errorf("CloseBy logged %q", line)
		}
	default:
		t.Error("CloseBy returned without saying the connections were still closing: it waited for them")
	}
	proxy.Heal()
	proxy.ResetAll()
	<-done
	// The server's side of the sleep never heard of the cancel.
	if _, err := watcher.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'`); err != nil {
		t.Fatal(err)
	}
}
