// Package pgtest gives tests a real PostgreSQL: one server per test binary (or the one named by
// PLAYHEAD_TEST_DATABASE_URL) and a fresh, migrated database per test, cloned from a template.
//
// Packages that use it call Main from their TestMain so the server they started is stopped.
// When no PostgreSQL can be had the test fails with a message saying what to install; it
// never skips.
package pgtest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver pgtestdb connects with
	"github.com/peterldowns/pgtestdb"
	"go.uber.org/goleak"

	"github.com/playhead/playhead/migrations"
)

// EnvURL names the variable that points the tests at an existing server instead of starting
// one. The role in it must be allowed to create roles and databases.
const EnvURL = "PLAYHEAD_TEST_DATABASE_URL"

var (
	startOnce sync.Once
	server    *Server
	startErr  error
)

// Server is a PostgreSQL server the tests use.
type Server struct {
	// Config is how pgtestdb reaches the server as an administrator.
	Config pgtestdb.Config
	// DataDir and BinDir are set when this package started the cluster itself.
	DataDir, BinDir string
	dir             string
	opts            string // the server options of pg_ctl start, for Start after Stop
}

var (
	atExitMu sync.Mutex
	atExit   []func()
)

// AtExit registers f to run once the tests of the package have run, before the leak check:
// helpers that start servers of their own (internal/s3test) stop them there.
func AtExit(f func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExit = append(atExit, f)
}

// Main runs the tests of a package, then checks that they leaked no goroutines (goleak,
// ignoring the long-lived goroutines of fasthttp and pgxpool that outlive a closed server by
// design), and stops the server this package started, if any.
func Main(m *testing.M, ignore ...goleak.Option) {
	code := m.Run()
	runFailed.Store(code != 0)
	atExitMu.Lock()
	for _, f := range atExit {
		f()
	}
	atExitMu.Unlock()
	if code == 0 && !fuzzing() {
		http.DefaultClient.CloseIdleConnections()
		ignore = append(ignore, LongLived()...)
		if err := goleak.Find(ignore...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if pooler != nil {
		pooler.stop()
		if server.DataDir == "" {
			os.RemoveAll(filepath.Dir(pooler.dir))
		}
	}
	if server != nil && server.DataDir != "" {
		server.stop()
	}
	os.Exit(code)
}

// LongLived ignores the goroutines that outlive a closed server by design, for goleak: fasthttp's
// process-wide worker-pool and date helpers, the file cache cleaner fasthttp starts for each
// app.Static (Fiber v2 gives it no stop channel), and pgxpool's health checker, which exits on
// its own shortly after Close.
func LongLived() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*inMemoryCacheManager).handleCleanCache"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	}
}

// fuzzing reports whether this process is fuzzing (go test -fuzz), as the coordinator or a
// worker: the fuzz engine's own goroutines outlive m.Run there, and a leak check that waits
// for them stalls the workers.
func fuzzing() bool {
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return true
	}
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// Shared returns the server for this test binary, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	if err := startShared(); err != nil {
		t.Fatal(err)
	}
	return server
}

// startShared starts the server for this test binary on first use, and says what to install
// when no PostgreSQL can be had.
func startShared() error {
	startOnce.Do(func() {
		server, startErr = start()
		if startErr == nil && os.Getenv(EnvPgBouncer) == "1" {
			startErr = startPooler(server)
		}
	})
	if startErr != nil {
		return fmt.Errorf("pgtest: no PostgreSQL for the tests: %w\n"+
			"install it (Debian: apt-get install postgresql) or set %s to a server URL", startErr, EnvURL)
	}
	return nil
}

var (
	examplesOnce sync.Once
	examplesURL  string
	examplesErr  error
	// runFailed is set by Main once the tests have run: the examples' database is kept when
	// they failed, as a test's is.
	runFailed atomic.Bool
)

// ExampleURL returns the URL of a migrated database shared by the examples of the test binary,
// created on first use. An Example function has no *testing.T to ask for a database of its
// own, so it calls this (through a helper of its package's tests); Main drops the database
// once the tests and examples have passed. The error says what to install when no PostgreSQL
// can be had.
func ExampleURL() (string, error) {
	examplesOnce.Do(func() {
		if examplesErr = startShared(); examplesErr != nil {
			return
		}
		examplesURL, examplesErr = exampleDatabase()
	})
	return examplesURL, examplesErr
}

// exampleDatabase creates the examples' database through pgtestdb, whose Fatalf (here a
// panic, recovered) must not return.
func exampleDatabase() (url string, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(mainFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("pgtest: the examples' database: %s", string(f))
		}
	}()
	return pgtestdb.Custom(mainTB{}, server.Config, migrator{}).URL(), nil
}

// mainTB is pgtestdb.TB outside any test: its cleanups run in Main after the tests, and a
// failure panics with mainFatal (in a cleanup, one that only says so on stderr).
type mainTB struct{}

type mainFatal string

func (mainTB) Cleanup(f func()) {
	AtExit(func() {
		defer func() {
			if r := recover(); r != nil {
				msg, ok := r.(mainFatal)
				if !ok {
					panic(r)
				}
				fmt.Fprintln(os.Stderr, "pgtest: the examples' database:", string(msg))
			}
		}()
		f()
	})
}

func (mainTB) Failed() bool                      { return runFailed.Load() }
func (mainTB) Fatalf(format string, args ...any) { panic(mainFatal(fmt.Sprintf(format, args...))) }
func (mainTB) Helper()                           {}
func (mainTB) Logf(string, ...any)               {}

// URL creates a new migrated database for t, dropped when t passes, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	conf := pgtestdb.Custom(t, Shared(t).Config, migrator{})
	return conf.URL()
}

// EmptyURL creates a new database without Playhead's schema for t, dropped when t passes, and
// returns its URL: for a playhead binary of another version, which migrates it itself.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return pgtestdb.Custom(t, Shared(t).Config, pgtestdb.NoopMigrator{}).URL()
}

// Pool returns a pool on a new migrated database for t, and the database's URL.
func Pool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dbURL
}

// migrator applies Playhead's embedded migrations to pgtestdb's template database.
type migrator struct{}

func (migrator) Hash() (string, error) { return migrations.Hash() }

func (migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	_, err := migrations.Up(ctx, db)
	return err
}

func start() (*Server, error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		return fromURL(raw)
	}
	// Durability settings are off: a test cluster is thrown away, and fsync on a shared
	// machine makes the suite slow for nothing.
	return startCluster("-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400")
}

// StartDurable starts a cluster of its own with PostgreSQL's default settings (fsync,
// synchronous_commit and full_page_writes on, max_connections 100), for the benchmarks that
// compare with figures taken on such a cluster (bench/). Stop it with Close.
func StartDurable() (*Server, error) { return startCluster("") }

// Close stops a cluster started by StartDurable and deletes its files.
func (s *Server) Close() {
	if s.DataDir != "" {
		s.stop()
	}
}

// URL returns the URL of database on s, as its administrator.
func (s *Server) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(s.Config.User, s.Config.Password),
		Host: net.JoinHostPort(s.Config.Host, s.Config.Port), Path: "/" + database, RawQuery: s.Config.Options}
	if s.Config.Password == "" {
		u.User = url.User(s.Config.User)
	}
	return u.String()
}

func fromURL(raw string) (*Server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	password, _ := u.User.Password()
	return &Server{Config: pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       cmp.Or(u.Port(), "5432"),
		User:       u.User.Username(),
		Password:   password,
		Database:   strings.TrimPrefix(u.Path, "/"),
		Options:    cmp.Or(u.RawQuery, "sslmode=disable"),
	}}, nil
}

// startCluster runs initdb and pg_ctl into a temporary directory, with settings (server
// options, "-c name=value …") on top of the defaults. PostgreSQL refuses to run as root, so as
// root the commands run as the postgres user, which owns the directory.
func startCluster(settings string) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	removeAbandoned(bin)
	dir, err := os.MkdirTemp("", clusterDirPrefix)
	if err != nil {
		return nil, err
	}
	// The owner's pid lets a later run stop this cluster if this test binary is killed
	// before it can (a timeout, a Ctrl-C): otherwise its postgres would run on forever.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{BinDir: bin, DataDir: filepath.Join(dir, "data"), dir: dir}
	if os.Geteuid() == 0 {
		if err := chownToPostgres(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := s.run("initdb", "-D", s.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 %s", port, dir, settings)
	s.opts = opts
	if out, err := s.run("pg_ctl", "-D", s.DataDir, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %w: %s %s", err, out, log)
	}
	s.Config = pgtestdb.Config{
		DriverName: "pgx",
		Host:       "127.0.0.1",
		Port:       strconv.Itoa(port),
		User:       "postgres",
		Database:   "postgres",
		Options:    "sslmode=disable",
	}
	return s, nil
}

const (
	clusterDirPrefix = "playhead-pgtest-"
	ownerFile        = "owner.pid"
)

// removeAbandoned stops and deletes the clusters of test binaries that died without
// stopping them.
func removeAbandoned(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterDirPrefix+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || processAlive(pid) {
			continue
		}
		stale := &Server{BinDir: bin, DataDir: filepath.Join(dir, "data"), dir: dir}
		stale.stop()
	}
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

// Restart restarts a cluster this package started (pg_ctl restart -m fast), for fault tests.
func (s *Server) Restart() error {
	if s.DataDir == "" {
		return errors.New("pgtest: the server was not started by this package")
	}
	// -l again: without it the restarted server would write to pg_ctl's stdout, a pipe this
	// process would then wait on forever.
	out, err := s.run("pg_ctl", "-D", s.DataDir, "-m", "fast", "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w: %s", err, out)
	}
	return nil
}

// Stop stops a cluster this package started (pg_ctl stop -m fast) until Start, for fault
// tests that need the database away for longer than a restart.
func (s *Server) Stop() error {
	if s.DataDir == "" {
		return errors.New("pgtest: the server was not started by this package")
	}
	if out, err := s.run("pg_ctl", "-D", s.DataDir, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// Start starts a cluster stopped with Stop, with its original options.
func (s *Server) Start() error {
	if s.DataDir == "" {
		return errors.New("pgtest: the server was not started by this package")
	}
	if out, err := s.run("pg_ctl", "-D", s.DataDir, "-o", s.opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// startPooler starts the PgBouncer of EnvPgBouncer in front of s, its files beside the
// cluster's (so that removeAbandoned stops it too) or, for a server named by EnvURL, in a
// temporary directory of its own.
func startPooler(s *Server) error {
	dir := s.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "playhead-pgbouncer-"); err != nil {
			return err
		}
	}
	var err error
	if pooler, err = startPgBouncer(s, dir); err != nil {
		return err
	}
	// PgBouncer keeps its server connections to a test's database after the test's clients
	// left, which would stop the database from being dropped.
	s.Config.ForceTerminateConnections = true
	return nil
}

func (s *Server) stop() {
	stopPgBouncerIn(s.dir)
	_, _ = s.run("pg_ctl", "-D", s.DataDir, "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(s.BinDir, name)
	cmd := exec.CommandContext(ctx, path, args...)
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return cmd.CombinedOutput()
}

// binDir finds the PostgreSQL server binaries: on PATH, or Debian's versioned directory.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return "", errors.New("initdb and pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a postgres user to run the server: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
