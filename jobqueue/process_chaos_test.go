package jobqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
)

// processChaosLimit is the cluster-wide limit of the process chaos test's kind.
const processChaosLimit = 3

// TestChaos_WorkerProcesses runs jobs of one kind limited to 3 running across the cluster
// (Kind.MaxRunning) on three worker processes, each with 4 slots (12 without the limit) and
// each behind its own fault proxy, with 1 s leases, while the test kills them with SIGKILL
// (starting them again) and partitions them from the database (healing after 0.2–1.5 leases),
// one fault every 50–400 ms until 80 % of the jobs are done. Every job is good: it runs for
// 50–500 ms and succeeds, so it needs one attempt of its 3; a lost lease that spent an attempt
// shows in its count, and three of them would make it DEAD.
//
// An auditor samples every 50 ms the runs in progress as the runs themselves record them (a
// mark file while each runs, counted until its process is reaped): never more than 3. Every
// job ends COMPLETED on its first attempt: lost leases delay a job, they do not fail it.
//
// Sized and seeded by PLAYHEAD_QUEUE_PROCESS_CHAOS_JOBS (default 300) and
// PLAYHEAD_QUEUE_CHAOS_SEED (default random, logged).
func TestChaos_WorkerProcesses(t *testing.T) {
	n := envInt(t, "PLAYHEAD_QUEUE_PROCESS_CHAOS_JOBS", 300)
	seed := uint64(envInt(t, "PLAYHEAD_QUEUE_CHAOS_SEED", int(rand.Uint32())))
	t.Logf("process chaos: %d jobs, 3 worker processes, limit %d, seed %d (replay with PLAYHEAD_QUEUE_CHAOS_SEED=%d)",
		n, processChaosLimit, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := setup(t)
	ctx := context.Background()
	const kind = "limited"
	specs := make([]jobqueue.Spec, n)
	for i := range specs {
		args, _ := json.Marshal(markArgs{MS: 50 + rng.IntN(450)})
		specs[i] = jobqueue.Spec{Kind: kind, Subject: int64(i + 1), MaxAttempts: 3, Args: args}
	}
	insertSpecs(t, b, specs...)

	c := newCluster(t, b)
	worker := func(name string) nodeSpec {
		return nodeSpec{Name: name, Lease: chaosLease, Kinds: []fixtureKind{
			{Name: kind, Behaviour: "mark", Concurrency: 4, MaxRunning: processChaosLimit}}}
	}
	names := []string{"worker-1", "worker-2", "worker-3"}
	for _, name := range names {
		c.start(worker(name))
	}

	audit := startAuditor(c)
	unfinished := func() int {
		return b.count(t, `SELECT count(*) FROM jobs WHERE status IN ('WAITING', 'PENDING', 'PROCESSING')`)
	}
	faults := map[string]int{}
	var background sync.WaitGroup
	faultsUntil := time.Now().Add(2 * time.Minute)
	for unfinished() > n/5 && time.Now().Before(faultsUntil) {
		name := names[rng.IntN(len(names))]
		s := c.slots[name]
		switch fault := []string{"kill -9", "partition", "reset"}[rng.IntN(3)]; fault {
		case "kill -9":
			c.mu.Lock()
			running := s.proc != nil
			c.mu.Unlock()
			if !running {
				continue // its restart is under way
			}
			faults[fault]++
			c.kill(s)
			after := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
			background.Go(func() { time.Sleep(after); c.start(worker(name)) })
		case "partition":
			faults[fault]++
			heal := chaosLease/5 + time.Duration(rng.Int64N(int64(13*chaosLease/10)))
			s.proxy.Partition()
			background.Go(func() { time.Sleep(heal); s.proxy.Heal() })
		case "reset":
			faults[fault]++
			s.proxy.ResetAll()
		}
		time.Sleep(50*time.Millisecond + time.Duration(rng.Int64N(int64(350*time.Millisecond))))
	}
	background.Wait()
	for _, s := range c.slots {
		s.proxy.Heal()
	}
	t.Logf("faults injected: %v", faults)
	giveUp := time.Now().Add(3 * time.Minute)
	for unfinished() > 0 {
		if time.Now().After(giveUp) {
			t.Fatalf("%d jobs unfinished 3 minutes after the faults stopped", unfinished())
		}
		time.Sleep(50 * time.Millisecond)
	}
	samples, most, over := audit.stop()
	for _, name := range names {
		c.stop(c.slots[name])
	}

	var completed, firstAttempt, lost, mostLost int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE attempt_count = 1),
		coalesce(sum(lost_count), 0), coalesce(max(lost_count), 0) FROM jobs WHERE kind = $1`, kind).
		Scan(&completed, &firstAttempt, &lost, &mostLost); err != nil {
		t.Fatal(err)
	}
	t.Logf("process chaos result: %d of %d jobs COMPLETED, %d on their first attempt; %d leases lost (at most %d by one job); "+
		"the auditor took %d samples, at most %d runs in progress at once (limit %d)",
		completed, n, firstAttempt, lost, mostLost, samples, most, processChaosLimit)
	if len(over) > 0 {
		t.Errorf("the auditor saw more than %d runs in progress %d times, e.g. %v", processChaosLimit, len(over), over[:min(3, len(over))])
	}
	if completed != n || firstAttempt != n {
		rows, err := b.pool.Query(ctx, `SELECT id, status, attempt_count, lost_count, coalesce(last_error, '') FROM jobs
			WHERE status <> 'COMPLETED' OR attempt_count <> 1 ORDER BY id LIMIT 5`)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			var id int64
			var status, lastError string
			var attempts, lost int
			err := row.Scan(&id, &status, &attempts, &lost, &lastError)
			return fmt.Sprintf("job %d %s at attempt %d, %d leases lost: %q", id, status, attempts, lost, lastError), err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("%d of %d good jobs COMPLETED, %d on their first attempt; want every one, on its first: %v", completed, n, firstAttempt, bad)
	}
	if lost == 0 {
		t.Error("no lease was lost: the faults did not test what they are for")
	}
}

// insertSpecs enqueues specs in one transaction.
func insertSpecs(t *testing.T, b *bundle, specs ...jobqueue.Spec) []int64 {
	t.Helper()
	ids := make([]int64, len(specs))
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		for i, s := range specs {
			e, err := jobqueue.Insert(context.Background(), tx, s)
			if err != nil {
				return err
			}
			ids[i] = e.ID
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// auditor samples a cluster's runs in progress every 50 ms.
type auditor struct {
	done    chan struct{}
	stopped chan struct{}
	samples int
	most    int
	over    []string
}

func startAuditor(c *cluster) *auditor {
	a := &auditor{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(a.stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-a.done:
				return
			case <-tick.C:
			}
			runs := c.running()
			a.samples++
			a.most = max(a.most, len(runs))
			if len(runs) > processChaosLimit {
				slices.Sort(runs)
				a.over = append(a.over, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), runs))
			}
		}
	}()
	return a
}

// stop ends the sampling and returns the samples taken, the most runs seen at once, and the
// samples over the limit.
func (a *auditor) stop() (samples, most int, over []string) {
	close(a.done)
	<-a.stopped
	return a.samples, a.most, a.over
}
