package jobqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/media"
)

// The queue's chaos test: several nodes, each with its own pool behind its own fault-injecting
// TCP proxy, run a few thousand jobs of two kinds with 1 s leases while the test resets their
// connections, partitions them (and heals), slows them, cuts them right after a COMMIT went
// out, kills them (cut off from the database, then stopped: no release gets through), stops
// them gracefully, and an admin retries DEAD jobs while retention prunes with a tiny age. Jobs
// succeed at once, run for several leases, fail and recover, always fail, fail permanently, or
// hang ignoring their cancellation. The invariants are checked at the end.
//
// Sized and seeded by PLAYHEAD_QUEUE_CHAOS_JOBS (default 2000), PLAYHEAD_QUEUE_CHAOS_NODES
// (default 4) and PLAYHEAD_QUEUE_CHAOS_SEED (default: random; the seed is logged, and a
// failure can be replayed with it, up to the machine's timing). make chaos runs it with more
// jobs and ten seeds.
func TestChaos_Queue(t *testing.T) {
	jobs, nodes, seed := chaosParams(t, "PLAYHEAD_QUEUE_CHAOS_JOBS", 2000, "jobs")
	c := newChaos(t, seed, func(c *chaos) []chaosKind {
		return []chaosKind{{c.kind("chaos-a", jobqueue.CancelWhenParentDead), 4}, {c.kind("chaos-b", jobqueue.CancelWhenParentDead), 2}}
	})
	c.enqueue(t, jobs)
	c.play(t, nodes)
	c.check(t)
}

// chaosParams reads a chaos test's size (the variable size, default def, of what), its
// number of nodes (PLAYHEAD_QUEUE_CHAOS_NODES, default 4) and its seed
// (PLAYHEAD_QUEUE_CHAOS_SEED, default random), and logs them with how to replay the run.
func chaosParams(t *testing.T, size string, def int, what string) (n, nodes int, seed uint64) {
	t.Helper()
	n = envInt(t, size, def)
	nodes = envInt(t, "PLAYHEAD_QUEUE_CHAOS_NODES", 4)
	seed = uint64(envInt(t, "PLAYHEAD_QUEUE_CHAOS_SEED", int(rand.Uint32())))
	t.Logf("chaos: %d %s, %d nodes, seed %d (replay with PLAYHEAD_QUEUE_CHAOS_SEED=%d)", n, what, nodes, seed, seed)
	return n, nodes, seed
}

// play starts nodes nodes, each behind its own proxy, races admin retries, retention and
// racers against them, and injects faults until 80% of the jobs have finished (or for two
// minutes at most: a node restarted every few seconds leaves the longest jobs little chance).
// Then calm: every slot healed and running, so the rest finishes (the racers keep racing
// until then), and every node is stopped.
func (c *chaos) play(t *testing.T, nodes int, racers ...func(ctx context.Context)) {
	for i := range nodes {
		c.slots = append(c.slots, c.newSlot(t, fmt.Sprintf("node-%d", i)))
	}
	for _, s := range c.slots {
		c.startNode(t, s)
	}
	raceCtx, stopRacing := context.WithCancel(context.Background())
	var racing sync.WaitGroup
	for _, race := range append([]func(context.Context){c.adminRetries, c.prune}, racers...) {
		racing.Go(func() { race(raceCtx) })
	}

	faultsUntil := time.Now().Add(2 * time.Minute)
	c.faults(t, func() bool { return c.unfinished(t) <= len(c.ids)/5 || time.Now().After(faultsUntil) })
	c.calm(t)
	c.waitFinished(t)
	stopRacing()
	racing.Wait()
	c.stopAll(t)
}

// waitFinished waits for every job to finish. It gives up, failing t but leaving the
// invariants to say why, after 3 minutes, or once only WAITING jobs have been left for 10 s:
// with nothing PENDING or PROCESSING, no completion can release them.
func (c *chaos) waitFinished(t *testing.T) {
	giveUp, runnable := time.Now().Add(3*time.Minute), time.Now()
	for c.unfinished(t) > 0 {
		if c.b.count(t, `SELECT count(*) FROM jobs WHERE status IN ('PENDING', 'PROCESSING')`) > 0 {
			runnable = time.Now()
		}
		switch {
		case time.Since(runnable) > 10*time.Second:
			t.Errorf("jobs WAITING for 10 s with nothing to run that could release them: %s", c.state(t))
			return
		case time.Now().After(giveUp):
			t.Errorf("jobs still unfinished 3 minutes after the faults stopped: %s", c.state(t))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func envInt(t *testing.T, name string, def int) int {
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("%s: %q is not a positive integer", name, raw)
	}
	return n
}

const chaosLease = time.Second

// behaviour is what a job does when it runs.
type behaviour int

const (
	quick     behaviour = iota // succeeds in a few milliseconds
	slow                       // succeeds after 1–2.5 leases (heartbeats must carry it)
	flaky                      // fails its first attempt, then succeeds
	failing                    // always fails: DEAD after its attempts
	permanent                  // fails permanently: DEAD at once
	hang                       // ignores cancellation for 1–2.5 leases, then succeeds (a zombie when its claim is gone)
)

func (b behaviour) String() string {
	return [...]string{"quick", "slow", "flaky", "failing", "permanent", "hang"}[b]
}

// run is one call of a kind's Run, as the test saw it.
type run struct {
	token         string
	attempt, max  int
	start, end    time.Time
	ignoresCancel bool
}

type chaos struct {
	b    *bundle
	seed uint64
	dir  string // outputs: dir/<media>/<claim token>
	ids  []int64

	mu       sync.Mutex
	rng      *rand.Rand
	runs     map[int64][]*run
	clock    *clockSteps
	revived  map[int64]int // successful admin retries per job
	refused  int           // admin retries refused
	faultLog map[string]int
	slots    []*slot
	admin    *jobqueue.Queue
	kinds    []chaosKind
}

// chaosKind is a kind every node runs, with its runner's concurrency on each node.
type chaosKind struct {
	jobqueue.Kind
	concurrency int
}

// queueKinds are c's kinds, for a Queue.
func (c *chaos) queueKinds() []jobqueue.Kind {
	kinds := make([]jobqueue.Kind, len(c.kinds))
	for i, k := range c.kinds {
		kinds[i] = k.Kind
	}
	return kinds
}

// slot is one node position: a proxy that outlives the nodes started behind it.
type slot struct {
	name       string
	proxy      *faultproxy.Proxy
	node       *chaosNode
	restarting atomic.Bool // one kill or stop at a time per slot
}

type chaosNode struct {
	pool     *pgxpool.Pool
	services lifecycle.Group
}

// newChaos sets up the database of a chaos test whose nodes run the kinds that kinds returns
// (their Run functions record every run in c).
func newChaos(t *testing.T, seed uint64, kinds func(c *chaos) []chaosKind) *chaos {
	b := setup(t)
	c := &chaos{b: b, seed: seed, dir: t.TempDir(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		runs: map[int64][]*run{}, clock: watchClock(t), revived: map[int64]int{}, faultLog: map[string]int{}}
	ctx := context.Background()
	// Every row retention deletes, with its status at the moment it went.
	if _, err := b.pool.Exec(ctx, `
		CREATE SEQUENCE chaos_seq;
		CREATE TABLE chaos_deleted (job_id bigint, subject_id bigint, status text,
		                            seq bigint NOT NULL DEFAULT nextval('chaos_seq'), at timestamptz NOT NULL DEFAULT clock_timestamp());
		CREATE FUNCTION chaos_record_delete() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN INSERT INTO chaos_deleted VALUES (OLD.id, OLD.subject_id, OLD.status); RETURN OLD; END $$;
		CREATE TRIGGER chaos_record_delete BEFORE DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION chaos_record_delete();
		-- A completed job's effect: one row per completion that committed. No unique key on
		-- purpose: a second effect must be countable. tx and seq (the order of the writes the
		-- test records) let the group test match it to the job's transitions.
		CREATE TABLE chaos_effects (job_id bigint, claim_token uuid,
		                            tx xid8 NOT NULL DEFAULT pg_current_xact_id(), seq bigint NOT NULL DEFAULT nextval('chaos_seq'))`); err != nil {
		t.Fatal(err)
	}
	c.kinds = kinds(c)
	c.admin = newQueue(t, b.pool, chaosLease, c.queueKinds()...)
	return c
}

// enqueue creates n media, spread over 50 owners, each with one job of kind chaos-a or
// chaos-b.
func (c *chaos) enqueue(t *testing.T, n int) {
	ctx := context.Background()
	rows, err := c.b.pool.Query(ctx, `
		WITH owners AS (INSERT INTO members (id) SELECT g FROM generate_series(1, 50) g ON CONFLICT DO NOTHING),
		m AS (INSERT INTO media (owner_id, title, status, visibility)
		      SELECT 1 + g % 50, 'chaos', 'PROCESSING', 'PRIVATE' FROM generate_series(1, $1::int) g RETURNING id)
		INSERT INTO jobs (kind, subject_id, max_attempts)
		SELECT CASE WHEN id % 3 = 0 THEN 'chaos-b' ELSE 'chaos-a' END, id, 3 FROM m
		RETURNING id`, n)
	if err != nil {
		t.Fatal(err)
	}
	if c.ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
}

// behaviourOf is a job's behaviour, fixed by the seed.
func (c *chaos) behaviourOf(id int64) (behaviour, time.Duration) {
	r := rand.New(rand.NewPCG(c.seed, uint64(id)))
	d := chaosLease + time.Duration(r.Int64N(int64(3*chaosLease/2)))
	switch p := r.IntN(100); {
	case p < 60:
		return quick, time.Duration(r.IntN(5)) * time.Millisecond
	case p < 70:
		return slow, d
	case p < 80:
		return flaky, 0
	case p < 87:
		return failing, 0
	case p < 92:
		return permanent, 0
	default:
		return hang, d
	}
}

// kind is a chaos kind: media.JobKind's hooks (owner and media locked first, media FAILED and
// one outbox row when DEAD, PROCESSING again on an admin retry), rule for a job of a group whose
// parent goes DEAD, and a Run that behaves as the job's behaviour says (c.run), writes an
// output file under its claim's prefix, and on completion makes the media READY with that
// prefix and records the effect: one transaction per completion.
func (c *chaos) kind(name string, rule jobqueue.ParentDeadRule) jobqueue.Kind {
	k := mediaKind(name, c.run(func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		prefix := filepath.Join(c.dir, strconv.FormatInt(j.Subject, 10), j.ClaimToken)
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return jobqueue.Result{}, err
		}
		if err := os.WriteFile(filepath.Join(prefix, "out"), []byte("output"), 0o644); err != nil {
			return jobqueue.Result{}, err
		}
		return jobqueue.Result{
			Commit: func(ctx context.Context, tx pgx.Tx) error {
				if err := media.MarkReady(ctx, tx, j.Subject, media.Encoded{HLSKey: prefix, ThumbnailKey: prefix, DurationMS: 1000}, nil); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO chaos_effects VALUES ($1, $2::uuid)`, j.ID, j.ClaimToken)
				return err
			},
			Discard: func(context.Context) { _ = os.RemoveAll(prefix) },
			// The winner removes what other claims left behind, as the encode kind does.
			Committed: func(context.Context) error {
				parent := filepath.Dir(prefix)
				entries, err := os.ReadDir(parent)
				for _, e := range entries {
					if e.Name() != j.ClaimToken {
						_ = os.RemoveAll(filepath.Join(parent, e.Name()))
					}
				}
				return err
			},
		}, nil
	}))
	k.OnParentDead = rule
	return k
}

// run is a chaos kind's Run: it records the run in c.runs, does what the job's behaviour says,
// and on success returns what succeed returns.
func (c *chaos) run(succeed func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error)) func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	return func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		r := &run{token: j.ClaimToken, attempt: j.Attempt, max: j.MaxAttempts, start: time.Now()}
		c.mu.Lock()
		c.runs[j.ID] = append(c.runs[j.ID], r)
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			r.end = time.Now()
			c.mu.Unlock()
		}()
		b, d := c.behaviourOf(j.ID)
		switch b {
		case quick, slow:
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return jobqueue.Result{}, context.Cause(ctx)
			}
		case flaky:
			if j.Attempt < 2 {
				return jobqueue.Result{}, errors.New("flaky: first attempt fails")
			}
		case failing:
			return jobqueue.Result{}, errors.New("always fails")
		case permanent:
			return jobqueue.Result{}, jobqueue.Permanent(errors.New("cannot succeed"))
		case hang:
			c.mu.Lock()
			r.ignoresCancel = true
			c.mu.Unlock()
			time.Sleep(d)
		}
		return succeed(ctx, j)
	}
}

func (c *chaos) newSlot(t *testing.T, name string) *slot {
	cfg, err := pgxpool.ParseConfig(c.b.url)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(fmtHostPort(cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &slot{name: name, proxy: p}
}

// startNode starts a fresh node behind s's proxy: its own pool, queue, a runner per kind of
// c.kinds and a rescuer.
func (c *chaos) startNode(t *testing.T, s *slot) {
	url, err := s.proxy.URL(c.b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	// Generous on purpose: with a connect timeout shorter than the postmaster takes to fork a
	// backend on a loaded machine, every pool gives up and retries before its connection is
	// accepted, the listen queue fills with abandoned connections, and no node connects again
	// (seen here with 500 ms: 843 connections queued, none served, for minutes).
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, pool, chaosLease, c.queueKinds()...)
	n := &chaosNode{pool: pool}
	for _, k := range c.kinds {
		r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: k.Name, Node: s.name, Concurrency: k.concurrency,
			PollInterval: 50 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryCap: 200 * time.Millisecond,
			FinishTimeout: 5 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		n.services.Add(k.Name+" runner", r)
	}
	n.services.Add("rescuer", jobqueue.NewRescuer(q, jobqueue.RescuerConfig{Interval: 250 * time.Millisecond, Logger: quiet}))
	if err := n.services.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	s.node = n
	c.mu.Unlock()
}

// stopNode stops s's node and closes its pool. A kill first cuts the node off from the
// database, so its releases and finishes never arrive, as when a process dies.
func (c *chaos) stopNode(s *slot, kill bool) error {
	c.mu.Lock()
	n := s.node
	s.node = nil
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	if kill {
		s.proxy.Refuse(true)
		s.proxy.ResetAll()
	}
	// Hanging jobs ignore their cancellation for up to 2.5 leases.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := n.services.Stop(ctx)
	n.pool.Close()
	if kill {
		s.proxy.Refuse(false)
	}
	return err
}

// state describes the unfinished jobs, for a failure message.
func (c *chaos) state(t *testing.T) string {
	rows, err := c.b.pool.Query(context.Background(), `
		SELECT status, kind, attempt_count, coalesce(lease_until < clock_timestamp(), false), available_at < clock_timestamp(), count(*)
		FROM jobs WHERE status IN ('WAITING', 'PENDING', 'PROCESSING') GROUP BY 1, 2, 3, 4, 5`)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var status, kind string
		var attempts, n int
		var expired, due bool
		err := row.Scan(&status, &kind, &attempts, &expired, &due, &n)
		return fmt.Sprintf("%d %s %s at attempt %d (lease expired %v, due %v)", n, status, kind, attempts, expired, due), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(groups)
}

func (c *chaos) unfinished(t *testing.T) int {
	return c.b.count(t, `SELECT count(*) FROM jobs WHERE status IN ('WAITING', 'PENDING', 'PROCESSING')`)
}

func (c *chaos) pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

func (c *chaos) pause(min, max time.Duration) time.Duration {
	return min + time.Duration(c.pick(int(max-min)))
}

// faults injects one fault at a time, at random, until done says so. Partitions, latency and
// restarts end by themselves in the background.
func (c *chaos) faults(t *testing.T, done func() bool) {
	var background sync.WaitGroup
	defer background.Wait()
	for !done() {
		s := c.slots[c.pick(len(c.slots))]
		fault := []string{"reset", "reset", "partition", "latency", "cut after COMMIT", "kill", "graceful stop"}[c.pick(7)]
		c.mu.Lock()
		c.faultLog[fault]++
		c.mu.Unlock()
		switch fault {
		case "reset":
			s.proxy.ResetAll()
		case "partition":
			d := c.pause(chaosLease/5, 3*chaosLease/2)
			s.proxy.Partition()
			background.Go(func() { time.Sleep(d); s.proxy.Heal() })
		case "latency":
			d := c.pause(chaosLease/2, 2*chaosLease)
			s.proxy.SetLatency(c.pause(5*time.Millisecond, 50*time.Millisecond))
			background.Go(func() { time.Sleep(d); s.proxy.SetLatency(0) })
		case "cut after COMMIT":
			s.proxy.CutAfter(commitMessage)
		case "kill", "graceful stop":
			if !s.restarting.CompareAndSwap(false, true) {
				continue
			}
			background.Go(func() {
				defer s.restarting.Store(false)
				if err := c.stopNode(s, fault == "kill"); err != nil {
					t.Errorf("%s of %s: %v", fault, s.name, err)
				}
				c.startNode(t, s)
			})
		}
		time.Sleep(c.pause(50*time.Millisecond, 400*time.Millisecond))
	}
}

// calm heals every proxy and waits for the restarts in flight (faults returns after them).
func (c *chaos) calm(t *testing.T) {
	for _, s := range c.slots {
		s.proxy.Heal()
		s.proxy.SetLatency(0)
		s.proxy.Refuse(false)
		s.proxy.CutAfter([]byte("\x00never sent\x00")) // disarm an unfired cut
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("faults injected: %v", c.faultLog)
}

func (c *chaos) stopAll(t *testing.T) {
	for _, s := range c.slots {
		if err := c.stopNode(s, false); err != nil {
			t.Errorf("stop %s: %v", s.name, err)
		}
	}
}

// adminRetries retries a random DEAD job every few milliseconds (each job at most twice, so
// the always-failing ones end), racing the runners, the rescuers and retention. A refused
// retry is counted and fine.
func (c *chaos) adminRetries(ctx context.Context) {
	for ctx.Err() == nil {
		var id int64
		if err := c.b.pool.QueryRow(ctx, `SELECT id FROM jobs WHERE status = 'DEAD' ORDER BY random() LIMIT 1`).Scan(&id); err == nil {
			c.mu.Lock()
			allowed := c.revived[id] < 2
			c.mu.Unlock()
			// Not cancelled with the race: a retry that committed is counted.
			if allowed {
				err := c.admin.RetryDead(context.WithoutCancel(ctx), id)
				c.mu.Lock()
				switch {
				case err == nil:
					c.revived[id]++
				case apperr.CodeOf(err) == apperr.Conflict:
					c.refused++ // no longer DEAD, or (a job of a group) a parent of it is DEAD
				}
				c.mu.Unlock()
			}
		}
		time.Sleep(c.pause(2*time.Millisecond, 20*time.Millisecond))
	}
}

// prune runs retention with a tiny age, racing the admin retries.
func (c *chaos) prune(ctx context.Context) {
	p := jobqueue.NewPruner(c.admin, jobqueue.PrunerConfig{CompletedAfter: 50 * time.Millisecond, DeadAfter: 50 * time.Millisecond,
		Batch: 50, Logger: quiet})
	for ctx.Err() == nil {
		_, _ = p.Prune(ctx)
		time.Sleep(c.pause(time.Millisecond, 20*time.Millisecond))
	}
}
