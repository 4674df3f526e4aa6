package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"
)

// EnvPgBouncer, set to 1, puts PgBouncer in transaction mode in front of the tests' server
// (make test-pgbouncer): PooledURL then hands out URLs through it, and internal/binarytest
// runs every playhead serve with DATABASE_URL through PgBouncer and
// PLAYHEAD_DATABASE_DIRECT_URL on the server itself.
const EnvPgBouncer = "PLAYHEAD_TEST_PGBOUNCER"

// pooler is the PgBouncer this process started in front of server, if any.
var pooler *pgBouncer

// pgBouncer is a PgBouncer process in transaction mode started by this package.
type pgBouncer struct {
	dir  string // its files: configuration, users, log, pid
	host string // 127.0.0.1:port it listens on
}

// PooledURL returns directURL, a database on the shared server, through the PgBouncer in
// front of it when EnvPgBouncer is set, and "" otherwise, or when directURL points anywhere
// else (a fault proxy stays what the test made it).
func PooledURL(t testing.TB, directURL string) string {
	t.Helper()
	if os.Getenv(EnvPgBouncer) != "1" {
		return ""
	}
	s := Shared(t)
	u, err := url.Parse(directURL)
	if err != nil || pooler == nil || u.Host != net.JoinHostPort(s.Config.Host, s.Config.Port) {
		return ""
	}
	u.Host = pooler.host
	return u.String()
}

// startPgBouncer starts PgBouncer in front of s, its files in a directory of its own under
// dir. The databases are a wildcard (every test's database goes through), and the users are
// the administrator and pgtestdb's role, whose passwords PgBouncer uses to log in to s.
func startPgBouncer(s *Server, dir string) (*pgBouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("%s=1 needs pgbouncer (Debian: apt-get install pgbouncer): %w", EnvPgBouncer, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &pgBouncer{dir: filepath.Join(dir, "pgbouncer"), host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, err
	}
	users := fmt.Sprintf("%q %q\n%q %q\n", s.Config.User, s.Config.Password, pgtestdb.DefaultRoleUsername, pgtestdb.DefaultRolePassword)
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = transaction
; one pool per test database; the server allows 400 connections, the direct ones included
default_pool_size = 8
max_client_conn = 4000
logfile = %s
pidfile = %s
`, s.Config.Host, s.Config.Port, port, filepath.Join(b.dir, "users.txt"), s.Config.User, filepath.Join(b.dir, "pgbouncer.log"), b.pidFile())
	for name, content := range map[string]string{"users.txt": users, "pgbouncer.ini": conf} {
		if err := os.WriteFile(filepath.Join(b.dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"-d", "-q", filepath.Join(b.dir, "pgbouncer.ini")}
	cmd := exec.CommandContext(ctx, bin, args...)
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root, like PostgreSQL.
		if err := chownToPostgres(b.dir); err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgbouncer: %w: %s", err, out)
	}
	if err := b.waitReady(ctx, s); err != nil {
		b.stop()
		log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
		return nil, fmt.Errorf("pgbouncer: %w; its log:\n%s", err, log)
	}
	return b, nil
}

// PooledClients returns how many client connections PgBouncer holds for database (its admin
// console's SHOW CLIENTS): a test's proof that a server it started connects through it. It
// fails the test when no PgBouncer runs.
func PooledClients(t testing.TB, database string) int {
	t.Helper()
	if pooler == nil {
		t.Fatalf("pgtest: no PgBouncer (set %s=1)", EnvPgBouncer)
	}
	s := Shared(t)
	u, err := url.Parse(s.URL("pgbouncer"))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = pooler.host
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol") // the admin console speaks only that
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("pgtest: PgBouncer's admin console: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SHOW CLIENTS")
	if err != nil {
		t.Fatalf("pgtest: SHOW CLIENTS: %v", err)
	}
	defer rows.Close()
	column := -1
	for i, f := range rows.FieldDescriptions() {
		if f.Name == "database" {
			column = i
		}
	}
	n := 0
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			t.Fatalf("pgtest: SHOW CLIENTS: %v", err)
		}
		if column >= 0 && fmt.Sprint(values[column]) == database {
			n++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pgtest: SHOW CLIENTS: %v", err)
	}
	return n
}

func (b *pgBouncer) pidFile() string { return filepath.Join(b.dir, "pgbouncer.pid") }

// waitReady connects through b until a query answers or ctx ends.
func (b *pgBouncer) waitReady(ctx context.Context, s *Server) error {
	u, err := url.Parse(s.URL(s.Config.Database))
	if err != nil {
		return err
	}
	u.Host = b.host
	var last error
	for {
		conn, err := pgx.Connect(ctx, u.String())
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the PgBouncer whose pid file is under dir, if it runs (SIGTERM: immediate
// shutdown; its clients are the tests' servers, already stopped).
func stopPgBouncerIn(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "pgbouncer", "pgbouncer.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || !processAlive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *pgBouncer) stop() { stopPgBouncerIn(filepath.Dir(b.dir)) }
