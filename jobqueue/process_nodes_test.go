package jobqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/notify"
)

// The process-level tests (cluster-wide limits, unique keys, pause, lost leases) run their
// nodes as processes of this test binary, so that a kill -9 is one: envNode makes the binary
// one node (runNode) instead of running tests (TestMain), its value the node's nodeSpec as
// JSON. Each node reaches the database through its own fault proxy, which outlives the
// processes started behind it.
const envNode = "JOBQUEUE_TEST_NODE"

// nodeSpec is what one node process does: run fixture kinds (Kinds), or enqueue (Enqueue).
type nodeSpec struct {
	Name string
	// Incarnation names this process among every process of the test: a run marks itself
	// with it, so the test tells the marks of a live process from a killed one's.
	Incarnation string
	URL         string
	Lease       time.Duration
	Kinds       []fixtureKind
	// MarkDir is where a run of a "mark" kind keeps a file while it is in progress.
	MarkDir string
	Enqueue *enqueueSpec
}

// fixtureKind is a kind a node runs, with what its runs do.
type fixtureKind struct {
	Name          string
	Behaviour     string // "mark": a file in MarkDir while it runs; "kill": SIGKILL to its own process
	Concurrency   int
	MaxRunning    int
	MaxLostLeases int
}

// markArgs are a "mark" job's arguments: how long it runs.
type markArgs struct {
	MS int `json:"ms"`
}

// enqueueSpec makes a node an enqueuer: Count enqueues of Kind at once, in as many
// transactions, job i with unique key i % Keys, started when the file Go appears (after the
// node created Ready with its connections open). It prints one enqueued line per enqueue.
type enqueueSpec struct {
	Kind      string
	Keys      int
	Count     int
	Offset    int
	Ready, Go string
}

// enqueued is one enqueue as an enqueuer node saw it.
type enqueued struct {
	Key      int   `json:"key"`
	ID       int64 `json:"id"`
	Existing bool  `json:"existing"`
}

// fixtureKinds are the queue kinds of spec's fixture kinds.
func fixtureKinds(spec nodeSpec) []jobqueue.Kind {
	kinds := make([]jobqueue.Kind, len(spec.Kinds))
	for i, f := range spec.Kinds {
		kinds[i] = jobqueue.Kind{Name: f.Name, MaxRunning: f.MaxRunning, MaxLostLeases: f.MaxLostLeases, Run: fixtureRun(spec, f)}
	}
	return kinds
}

// fixtureRun is the Run of the fixture kind f.
func fixtureRun(spec nodeSpec, f fixtureKind) func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	if f.Behaviour == "kill" {
		return func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
			// A job that kills whatever runs it: the worker process dies mid-run, every time.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	return func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		var args markArgs
		if err := json.Unmarshal(j.Args, &args); err != nil {
			return jobqueue.Result{}, jobqueue.Permanent(err)
		}
		mark := filepath.Join(spec.MarkDir, fmt.Sprintf("%s_%d_%s", spec.Incarnation, j.ID, j.ClaimToken))
		if err := os.WriteFile(mark, nil, 0o644); err != nil {
			return jobqueue.Result{}, err
		}
		// The mark goes when the run ends, however it ends: the runner's cancellation (a lost
		// claim, a heartbeat deadline, a stop) ends it at once.
		defer os.Remove(mark)
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
			return jobqueue.Result{}, nil
		case <-ctx.Done():
			return jobqueue.Result{}, context.Cause(ctx)
		}
	}
}

// runNode is one node process, until SIGTERM (a graceful stop) or SIGKILL.
func runNode(raw string) error {
	var spec nodeSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(spec.URL)
	if err != nil {
		return err
	}
	// As in the chaos test: a connect timeout shorter than a loaded postmaster's fork time
	// makes a pool give up on every connection.
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if spec.Enqueue != nil {
		return runEnqueuer(ctx, pool, *spec.Enqueue)
	}
	q, err := jobqueue.NewQueue(pool, spec.Lease, fixtureKinds(spec)...)
	if err != nil {
		return err
	}
	var services lifecycle.Group
	runners := map[string]*jobqueue.Runner{}
	for _, f := range spec.Kinds {
		r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: f.Name, Node: spec.Name, Concurrency: f.Concurrency,
			PollInterval: 50 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryCap: 200 * time.Millisecond,
			FinishTimeout: 5 * time.Second, Logger: quiet})
		if err != nil {
			return err
		}
		runners[f.Name] = r
		services.Add(f.Name+" runner", r)
	}
	// Woken by enqueues and by a Resume, as serve wires it.
	listener := notify.NewListener(spec.URL, quiet)
	listener.Handle(jobqueue.Channel, func(kind string) {
		if r := runners[kind]; r != nil {
			r.Wake()
		}
	}, func() {
		for _, r := range runners {
			r.Wake()
		}
	})
	services.Add("listener", listener)
	services.Add("rescuer", jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Interval: 100 * time.Millisecond, Logger: quiet}))
	if err := services.Start(context.Background()); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return services.Stop(stopCtx)
}

// runEnqueuer opens its connections, says it is ready, waits for the go, then makes every
// enqueue of e at once, each in its own transaction, and prints what each returned.
func runEnqueuer(ctx context.Context, pool *pgxpool.Pool, e enqueueSpec) error {
	conns := make([]*pgxpool.Conn, pool.Config().MaxConns)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Release()
	}
	if err := os.WriteFile(e.Ready, nil, 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(e.Go); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	results := make([]enqueued, e.Count)
	errs := make([]error, e.Count)
	var wg sync.WaitGroup
	for i := range e.Count {
		wg.Go(func() {
			key := (e.Offset + i) % e.Keys
			results[i].Key = key
			errs[i] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				got, err := jobqueue.Insert(ctx, tx, jobqueue.Spec{Kind: e.Kind, Subject: int64(key), MaxAttempts: 3,
					UniqueKey: fmt.Sprintf("key-%d", key)})
				results[i].ID, results[i].Existing = got.ID, got.Existing
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// cluster is the node processes of one test, each name behind its own proxy.
type cluster struct {
	t       *testing.T
	b       *bundle
	markDir string

	mu      sync.Mutex
	started int
	slots   map[string]*nodeSlot
	live    map[string]bool // incarnations whose process has not been reaped
}

// nodeSlot is one node name: its proxy, and the process running behind it now (nil when none).
type nodeSlot struct {
	proxy  *faultproxy.Proxy
	spec   nodeSpec
	proc   *exec.Cmd
	exited chan struct{}
	stdout *bytes.Buffer
	// last is the process that exited last, once it has.
	last *exec.Cmd
	// restart starts the node again whenever its process exits by itself (a job killed it).
	restart bool
}

func newCluster(t *testing.T, b *bundle) *cluster {
	c := &cluster{t: t, b: b, markDir: t.TempDir(), slots: map[string]*nodeSlot{}, live: map[string]bool{}}
	t.Cleanup(func() {
		c.mu.Lock()
		slots := make([]*nodeSlot, 0, len(c.slots))
		for _, s := range c.slots {
			s.restart = false
			slots = append(slots, s)
		}
		c.mu.Unlock()
		for _, s := range slots {
			c.kill(s)
		}
	})
	return c
}

// start starts a node process of spec (its URL, incarnation and mark folder filled in) behind
// the proxy of its name, made on first use.
func (c *cluster) start(spec nodeSpec) *nodeSlot {
	c.t.Helper()
	c.mu.Lock()
	s := c.slots[spec.Name]
	if s == nil {
		proxy, url := pgtest.Proxied(c.t, c.b.url)
		spec.URL = url
		s = &nodeSlot{proxy: proxy}
		c.slots[spec.Name] = s
	} else {
		spec.URL = s.spec.URL
	}
	c.started++
	spec.Incarnation = fmt.Sprintf("%s#%d", spec.Name, c.started)
	spec.MarkDir = c.markDir
	s.spec = spec
	c.mu.Unlock()
	raw, err := json.Marshal(spec)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envNode+"="+string(raw))
	stdout := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	c.mu.Lock()
	s.proc, s.exited, s.stdout = cmd, exited, stdout
	c.live[spec.Incarnation] = true
	c.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		c.mu.Lock()
		delete(c.live, spec.Incarnation)
		again := s.restart && s.proc == cmd
		if s.proc == cmd {
			s.proc = nil
		}
		s.last = cmd
		c.mu.Unlock()
		close(exited)
		if again {
			c.start(spec)
		}
	}()
	return s
}

// kill sends SIGKILL to s's process, if one runs, and waits until it is reaped.
func (c *cluster) kill(s *nodeSlot) {
	c.mu.Lock()
	proc, exited := s.proc, s.exited
	s.proc = nil
	c.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Process.Kill()
	<-exited
}

// stop stops s's process with SIGTERM and waits for it; a non-zero exit fails the test.
func (c *cluster) stop(s *nodeSlot) {
	c.t.Helper()
	c.mu.Lock()
	proc, exited := s.proc, s.exited
	s.proc = nil
	c.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Process.Signal(syscall.SIGTERM)
	<-exited
	if code := proc.ProcessState.ExitCode(); code != 0 {
		c.t.Errorf("node %s exited %d after SIGTERM", s.spec.Name, code)
	}
}

// running is the runs in progress as the runs themselves record them: the marks of the
// processes not reaped yet (a killed process's marks stay behind, and count until it is).
func (c *cluster) running() []string {
	entries, err := os.ReadDir(c.markDir)
	if err != nil {
		c.t.Error(err) // the auditor's goroutine may not end the test
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var runs []string
	for _, e := range entries {
		incarnation, _, _ := strings.Cut(e.Name(), "_")
		if c.live[incarnation] {
			runs = append(runs, e.Name())
		}
	}
	return runs
}
