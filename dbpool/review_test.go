package dbpool_test

// Hostile review (issue 36): the commit that moved WaitReachable and CloseBy here said "each
// with a test", but the package had none.

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func proxied(t *testing.T) (*faultproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	conf := pgtest.Shared(t).Config
	proxy, err := faultproxy.Start(net.JoinHostPort(conf.Host, conf.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	url, err := proxy.URL(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return proxy, pool
}

// A database that refuses connections for a while is waited for; a cancelled wait ends at once.
func TestReview_WaitReachable(t *testing.T) {
	proxy, pool := proxied(t)
	defer pool.Close()
	proxy.Refuse(true)
	time.AfterFunc(1500*time.Millisecond, func() { proxy.Refuse(false) })
	start := time.Now()
	if err := dbpool.WaitReachable(context.Background(), pool, "PLAYHEAD_DATABASE_URL", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("WaitReachable: %v, want nil once the database accepts again", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("WaitReachable returned after %v, before the database accepted connections", waited)
	}
	proxy.Refuse(true)
	proxy.ResetAll()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := dbpool.WaitReachable(ctx, pool, "PLAYHEAD_DATABASE_URL", slog.New(slog.DiscardHandler)); err == nil {
		t.Error("WaitReachable on a refusing database with a cancelled context: nil")
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("a cancelled WaitReachable took %v", waited)
	}
	proxy.Refuse(false)
}

// CloseBy returns by its deadline even when a connection cannot close (a partitioned database
// with a query in flight).
func TestReview_CloseByReturnsAtTheDeadline(t *testing.T) {
	proxy, pool := proxied(t)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.Partition()
	queryCtx, cancelQuery := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = pool.Exec(queryCtx, `SELECT pg_sleep(30)`)
	}()
	time.Sleep(200 * time.Millisecond)
	cancelQuery()
	start := time.Now()
	dbpool.CloseBy(pool, time.Now().Add(500*time.Millisecond), slog.New(slog.DiscardHandler))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("CloseBy with a 500 ms deadline took %v", took)
	}
	proxy.Heal()
	proxy.ResetAll()
	<-done
	pool.Close()
}
