package jobqueue_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
)

// TestUnique_ConcurrentEnqueuesFromFourProcesses: four processes make 250 enqueues each at
// once (1 000 in all, each in its own transaction, 16 at a time per process) of 100 unique
// keys. Exactly 100 jobs exist, one per key; every enqueue of a key returned that job's id,
// and exactly one enqueue per key inserted it.
func TestUnique_ConcurrentEnqueuesFromFourProcesses(t *testing.T) {
	b := setup(t)
	c := newCluster(t, b)
	const processes, each, keys = 4, 250, 100
	dir := t.TempDir()
	goFile := filepath.Join(dir, "go")
	var slots []*nodeSlot
	for i := range processes {
		name := fmt.Sprintf("enqueuer-%d", i)
		slots = append(slots, c.start(nodeSpec{Name: name, Enqueue: &enqueueSpec{Kind: "unique", Keys: keys, Count: each,
			Offset: i * each, Ready: filepath.Join(dir, name), Go: goFile}}))
	}
	// All at once: every process has its connections open before any enqueues.
	waitFor(t, "every enqueuer ready", func() bool {
		for i := range processes {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("enqueuer-%d", i))); err != nil {
				return false
			}
		}
		return true
	})
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ids := map[int]map[int64]int{} // key → id → enqueues that returned it
	inserted := map[int]int{}
	for _, s := range slots {
		<-s.exited
		if code := s.exitCode(); code != 0 {
			t.Fatalf("%s exited %d", s.spec.Name, code)
		}
		sc := bufio.NewScanner(strings.NewReader(s.stdout.String()))
		for sc.Scan() {
			var e enqueued
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s printed %q: %v", s.spec.Name, sc.Text(), err)
			}
			if ids[e.Key] == nil {
				ids[e.Key] = map[int64]int{}
			}
			ids[e.Key][e.ID]++
			if !e.Existing {
				inserted[e.Key]++
			}
		}
	}
	total := 0
	for key := range keys {
		var jobID int64
		for id, n := range ids[key] {
			jobID = id
			total += n
		}
		if len(ids[key]) != 1 || inserted[key] != 1 {
			t.Errorf("key %d: enqueues returned jobs %v, %d said they inserted; want one job, one insert", key, ids[key], inserted[key])
			continue
		}
		if got := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'unique' AND unique_key = $1 AND id = $2`, fmt.Sprintf("key-%d", key), jobID); got != 1 {
			t.Errorf("key %d: job %d is not the key's job", key, jobID)
		}
	}
	jobs := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'unique'`)
	t.Logf("%d enqueues from %d processes of %d keys: %d jobs", total, processes, keys, jobs)
	if total != processes*each || jobs != keys {
		t.Fatalf("%d enqueues answered, %d jobs; want %d and %d", total, jobs, processes*each, keys)
	}
}

// exitCode is the exit status of s's last process, once it exited.
func (s *nodeSlot) exitCode() int {
	return s.last.ProcessState.ExitCode()
}

// recordTransitions makes the database record every claim and every status change of a job
// in job_transitions, at the instant it happens (clock_timestamp, in the statement itself).
func recordTransitions(t *testing.T, b *bundle) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `
		CREATE TABLE job_transitions (job_id bigint NOT NULL, status text NOT NULL, claim_token uuid, node text,
		                              attempt_count int NOT NULL, lost_count int NOT NULL, lease_until timestamptz,
		                              at timestamptz NOT NULL DEFAULT clock_timestamp());
		CREATE FUNCTION record_transition() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		  INSERT INTO job_transitions (job_id, status, claim_token, node, attempt_count, lost_count, lease_until)
		  VALUES (NEW.id, NEW.status, NEW.claim_token, NEW.claimed_by, NEW.attempt_count, NEW.lost_count, NEW.lease_until);
		  RETURN NULL; END $$;
		CREATE TRIGGER record_transition AFTER UPDATE ON jobs FOR EACH ROW
		  WHEN (NEW.status IS DISTINCT FROM OLD.status OR NEW.claim_token IS DISTINCT FROM OLD.claim_token)
		  EXECUTE FUNCTION record_transition()`); err != nil {
		t.Fatal(err)
	}
}

// TestPause_ThreeNodesClaimNothingAfterThePause runs a steady stream of 100 ms jobs on three
// worker processes (2 slots each), pauses the kind, and enqueues more (every node is woken at
// once by the enqueue's notification, and polls every 50 ms besides). The database records
// each claim as it happens: none is later than 1 s after the pause committed (measured: the
// last claim's distance from the pause), the jobs running at the pause finish, and for 2 s no
// node claims anything while jobs are PENDING. After Resume every job runs.
func TestPause_ThreeNodesClaimNothingAfterThePause(t *testing.T) {
	b := setup(t)
	recordTransitions(t, b)
	ctx := context.Background()
	const kind = "steady"
	jobs := func(n int) []jobqueue.Spec {
		args, _ := json.Marshal(markArgs{MS: 100})
		specs := make([]jobqueue.Spec, n)
		for i := range specs {
			specs[i] = jobqueue.Spec{Kind: kind, Subject: int64(i + 1), MaxAttempts: 1, Args: args}
		}
		return specs
	}
	insertSpecs(t, b, jobs(600)...)
	c := newCluster(t, b)
	for i := range 3 {
		c.start(nodeSpec{Name: fmt.Sprintf("worker-%d", i), Lease: 5 * time.Second,
			Kinds: []fixtureKind{{Name: kind, Behaviour: "mark", Concurrency: 2}}})
	}
	claims := func() int { return b.count(t, `SELECT count(*) FROM job_transitions WHERE status = 'PROCESSING'`) }
	waitFor(t, "the three nodes claiming", func() bool {
		return b.count(t, `SELECT count(DISTINCT node) FROM job_transitions WHERE status = 'PROCESSING'`) == 3 && claims() >= 30
	})

	admin := newQueue(t, b.pool, 5*time.Second, jobqueue.Kind{Name: kind})
	if err := admin.Pause(ctx, kind, "test"); err != nil {
		t.Fatal(err)
	}
	var pausedAt time.Time
	if err := b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&pausedAt); err != nil {
		t.Fatal(err)
	}
	insertSpecs(t, b, jobs(10)...)
	waitFor(t, "the jobs running at the pause to finish", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND status = 'PROCESSING'`, kind) == 0
	})
	// What the nodes do while paused: 40 polls each, and the wake-ups of the enqueue.
	time.Sleep(2 * time.Second)
	var last time.Time
	var late int
	if err := b.pool.QueryRow(ctx, `SELECT max(at), count(*) FILTER (WHERE at > $1::timestamptz + interval '1 second')
		FROM job_transitions WHERE status = 'PROCESSING'`, pausedAt).Scan(&last, &late); err != nil {
		t.Fatal(err)
	}
	pending := b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND status = 'PENDING'`, kind)
	t.Logf("paused: the last claim came %v after the pause committed; %d claims later than 1 s; %d jobs PENDING",
		last.Sub(pausedAt).Round(time.Millisecond), late, pending)
	if late > 0 {
		t.Errorf("%d claims more than 1 s after the pause committed (the last %v after it)", late, last.Sub(pausedAt))
	}
	if pending == 0 {
		t.Fatal("no job left PENDING: the pause was not tested")
	}

	before := claims()
	var resumedAt time.Time
	if err := admin.Resume(ctx, kind); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&resumedAt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every job COMPLETED after the resume", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = $1 AND status <> 'COMPLETED'`, kind) == 0
	})
	var first time.Time
	if err := b.pool.QueryRow(ctx, `SELECT min(at) FROM job_transitions WHERE status = 'PROCESSING' AND at > $1`, pausedAt.Add(time.Second)).
		Scan(&first); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed: the first claim %v after the resume returned; %d claims after it", first.Sub(resumedAt).Round(time.Millisecond), claims()-before)
}

// TestLostLeases_AJobThatKillsItsWorkerGoesDead runs, on three worker processes started again
// whenever they die, one job whose run kills its worker process (SIGKILL) every time, beside
// 20 good jobs of one attempt each, with 1 s leases and MaxLostLeases 3. The poison job is
// claimed three times without spending an attempt, each claim after its lost-lease back-off,
// then goes DEAD with a reason that says its worker died or hung on each of its 3 runs, within
// the bound the queue states (jobqueue.LostLeaseBound); every good job COMPLETED on its first
// attempt though workers kept dying under them.
func TestLostLeases_AJobThatKillsItsWorkerGoesDead(t *testing.T) {
	b := setup(t)
	recordTransitions(t, b)
	ctx := context.Background()
	const maxLost = 3
	args, _ := json.Marshal(markArgs{MS: 300})
	poison := insertSpecs(t, b, jobqueue.Spec{Kind: "poison", Subject: 1, MaxAttempts: 3})[0]
	var good []jobqueue.Spec
	for i := range 20 {
		good = append(good, jobqueue.Spec{Kind: "good", Subject: int64(i + 1), MaxAttempts: 1, Args: args})
	}
	insertSpecs(t, b, good...)
	c := newCluster(t, b)
	for i := range 3 {
		s := c.start(nodeSpec{Name: fmt.Sprintf("worker-%d", i), Lease: time.Second, Kinds: []fixtureKind{
			{Name: "poison", Behaviour: "kill", Concurrency: 1, MaxLostLeases: maxLost},
			{Name: "good", Behaviour: "mark", Concurrency: 2}}})
		c.mu.Lock()
		s.restart = true
		c.mu.Unlock()
	}
	waitFor(t, "the poison job DEAD", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'DEAD'`, poison) == 1
	})
	var attempts, lost int
	var lastError string
	if err := b.pool.QueryRow(ctx, `SELECT attempt_count, lost_count, coalesce(last_error, '') FROM jobs WHERE id = $1`, poison).
		Scan(&attempts, &lost, &lastError); err != nil {
		t.Fatal(err)
	}
	var claims int
	var firstClaim, dead time.Time
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'PROCESSING'), min(at) FILTER (WHERE status = 'PROCESSING'),
		max(at) FILTER (WHERE status = 'DEAD') FROM job_transitions WHERE job_id = $1`, poison).Scan(&claims, &firstClaim, &dead); err != nil {
		t.Fatal(err)
	}
	bound := lostLeaseBound(maxLost, time.Second)
	took := dead.Sub(firstClaim)
	t.Logf("the poison job: %d claims, attempt %d, %d leases lost, DEAD %v after its first claim (bound %v): %q",
		claims, attempts, lost, took.Round(time.Millisecond), bound, lastError)
	// lost_count counts the leases lost before the last claim; the rescuer does not count the
	// last one, whose expiry made the job DEAD.
	if claims != maxLost || attempts != 1 || lost != maxLost-1 {
		t.Errorf("the poison job was claimed %d times, at attempt %d with %d leases lost before its last claim; want %d claims, attempt 1, %d lost",
			claims, attempts, lost, maxLost, maxLost-1)
	}
	// Each claim again waits for the back-off of the leases lost so far: 1 s after the first
	// expiry, 2 s after the second.
	rows, err := b.pool.Query(ctx, `SELECT at, lease_until FROM job_transitions WHERE job_id = $1 AND status = 'PROCESSING' ORDER BY at`, poison)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ At, LeaseUntil time.Time }])
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(runs); k++ {
		backoff := jobqueue.DefaultLostLeaseBackoff << (k - 1)
		if after := runs[k].At.Sub(runs[k-1].LeaseUntil); after < backoff {
			t.Errorf("claim %d of the poison job came %v after the lease it lost expired, before its back-off of %v", k+1, after, backoff)
		}
	}
	if !strings.Contains(lastError, "died or hung") || !strings.Contains(lastError, fmt.Sprint(maxLost)) {
		t.Errorf("the poison job's last error %q does not say that its worker died or hung on each of its %d runs", lastError, maxLost)
	}
	if took > bound {
		t.Errorf("the poison job went DEAD %v after its first claim, beyond the stated bound of %v", took, bound)
	}
	waitFor(t, "every good job finished", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'good' AND status NOT IN ('COMPLETED', 'DEAD')`) == 0
	})
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'good' AND status = 'COMPLETED' AND attempt_count = 1`); n != len(good) {
		t.Errorf("%d of %d good jobs COMPLETED on their first attempt, beside a job that kills its workers", n, len(good))
	}
}

// lostLeaseBound is how long after its first claim a job that kills its worker on every run
// is DEAD, with MaxLostLeases n, the default back-off and the nodes of these tests (50 ms
// polls, a 100 ms rescuer): the bound docs/internals/job-queue.md states (each of its n runs
// holds its lease to the end, each of the first n−1 expiries waits its back-off, 1 s, 2 s, 4 s,
// … capped, and the last one a rescuer's pass), plus a poll per claim again and a second per
// run for a loaded machine's statements and restarts: a threshold from the configuration, not
// a measurement.
func lostLeaseBound(n int, lease time.Duration) time.Duration {
	bound := time.Duration(n)*(lease+time.Second) + 100*time.Millisecond
	for i := range n - 1 {
		bound += min(jobqueue.DefaultLostLeaseBackoff<<i, jobqueue.LostLeaseBackoffCap) + 50*time.Millisecond
	}
	return bound
}
