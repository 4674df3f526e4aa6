package pgtest

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/faultproxy"
)

// Proxied starts a fault proxy in front of the shared test server and returns it with dbURL
// (a database of that server) rewritten to go through it; the proxy closes when the test ends.
// Its Partition, Refuse and ResetAll then make the database stop answering, refuse
// connections or drop them.
func Proxied(t testing.TB, dbURL string) (*faultproxy.Proxy, string) {
	t.Helper()
	conf := Shared(t).Config
	proxy, err := faultproxy.Start(net.JoinHostPort(conf.Host, conf.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	url, err := proxy.URL(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return proxy, url
}

// ProxiedPool is Proxied with a pool on the proxied URL, closed when the test ends.
func ProxiedPool(t testing.TB, dbURL string) (*faultproxy.Proxy, *pgxpool.Pool) {
	t.Helper()
	proxy, url := Proxied(t, dbURL)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return proxy, pool
}
