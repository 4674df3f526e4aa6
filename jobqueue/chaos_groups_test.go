package jobqueue_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// groupKinds are the kinds of the group test: with domain hooks or without, each under both
// rules. The kinds without domain writes complete in batches; plain-fail has Fail and Revive
// hooks (that only record themselves) so that its rule has hooks to run.
var groupKinds = []struct {
	name        string
	media       bool // media.JobKind's hooks: Lock, Fail, Revive, and a Commit
	hooks       bool // Fail and Revive hooks, recorded in chaos_hooks
	rule        jobqueue.ParentDeadRule
	concurrency int
}{
	{"media-cancel", true, true, jobqueue.CancelWhenParentDead, 2},
	{"media-fail", true, true, jobqueue.FailWhenParentDead, 2},
	{"plain-cancel", false, false, jobqueue.CancelWhenParentDead, 2},
	{"plain-fail", false, true, jobqueue.FailWhenParentDead, 2},
}

// groupShapes are the groups enqueued: After of each of the four jobs.
var groupShapes = []struct {
	name   string
	after  [4][]int
	weight int
}{
	{"diamond", [4][]int{nil, {0}, {0}, {1, 2}}, 40},
	{"chain", [4][]int{nil, {0}, {1}, {2}}, 15},
	{"fan-in", [4][]int{nil, nil, nil, {0, 1, 2}}, 15},
	{"fan-out", [4][]int{nil, {0}, {0}, {0}}, 15},
	{"two roots", [4][]int{nil, nil, {0, 1}, {2}}, 15},
}

// The queue's chaos test for groups: the nodes, faults, job behaviours, admin
// retries and retention of TestChaos_Queue, with every job in a group of four that waits for
// its parents (a diamond a → (b, c) → d, a chain, a fan-in, a fan-out, two roots joined),
// each job of one of four kinds: with media.JobKind's domain hooks (one transaction per
// completion) or without (batched completions), each under either OnParentDead rule.
//
// The database records, in the transaction that makes it, every change of a job's status (a
// trigger on jobs, with the transaction's id), every Fail and Revive hook and every
// completion's effect, so the end can judge what committed, not what the test believes:
// every group ends all COMPLETED or failed by its rule, no job is claimed or started before
// each of its parents' completion committed, the hooks that ran are those the rule says, and
// nothing is left WAITING, PENDING or PROCESSING. An auditor checks, in one snapshot every
// few hundred milliseconds while the chaos runs, that every WAITING job waits for exactly its
// parents that are not COMPLETED, none of them DEAD.
//
// Sized and seeded by PLAYHEAD_QUEUE_CHAOS_GROUPS (default 500), PLAYHEAD_QUEUE_CHAOS_NODES
// (default 4) and PLAYHEAD_QUEUE_CHAOS_SEED (default: random; logged, replayable up to the
// machine's timing: the seed fixes the groups' shapes and kinds, each job's behaviour and the
// order of the faults).
func TestChaos_QueueGroups(t *testing.T) {
	groups, nodes, seed := chaosParams(t, "PLAYHEAD_QUEUE_CHAOS_GROUPS", 500, "groups of 4 jobs")
	g := newGroupChaos(t, seed)
	g.enqueue(t, groups)
	g.play(t, nodes, g.audit)
	g.check(t)
}

// groupMaxAttempts is every job's MaxAttempts.
const groupMaxAttempts = 3

// member is one job of a group, as enqueued.
type member struct {
	kind      int // in groupKinds
	group     int
	parents   []int64
	ancestors map[int64]bool
}

type groupChaos struct {
	*chaos
	jobs   map[int64]*member
	groups [][]int64
	shapes map[string]int

	auditMu sync.Mutex
	audits  int
	audited *violations // what the auditor found
	// suspects are the groups (by index) of the jobs the auditor or the check found wrong,
	// whose history a failure prints.
	suspects map[int]bool
}

func newGroupChaos(t *testing.T, seed uint64) *groupChaos {
	c := newChaos(t, seed, func(c *chaos) []chaosKind {
		var kinds []chaosKind
		for _, spec := range groupKinds {
			k := jobqueue.Kind{Name: spec.name, Run: c.run(func(context.Context, jobqueue.Job) (jobqueue.Result, error) {
				return jobqueue.Result{}, nil
			}), OnParentDead: spec.rule}
			if spec.media {
				k = c.kind(spec.name, spec.rule)
			}
			if spec.hooks {
				k = recordHooks(k)
			}
			kinds = append(kinds, chaosKind{k, spec.concurrency})
		}
		return kinds
	})
	// Every change of a job's status (or claim, or count of parents waited for), with the
	// transaction that made it. A claim records how many of the job's parents had no
	// committed completion at that moment (a fresh snapshot: the trigger function's query).
	if _, err := c.b.pool.Exec(context.Background(), `
		CREATE TABLE chaos_edges (parent_id bigint NOT NULL, job_id bigint NOT NULL);
		CREATE INDEX ON chaos_edges (job_id);
		CREATE TABLE chaos_transitions (
		    seq bigint NOT NULL DEFAULT nextval('chaos_seq'), job_id bigint NOT NULL, from_status text, to_status text NOT NULL,
		    attempt int NOT NULL, waiting_on int NOT NULL, token uuid, last_error text, unfinished_parents int,
		    tx xid8 NOT NULL DEFAULT pg_current_xact_id(), at timestamptz NOT NULL DEFAULT clock_timestamp());
		CREATE INDEX ON chaos_transitions (job_id, to_status);
		CREATE TABLE chaos_hooks (
		    seq bigint NOT NULL DEFAULT nextval('chaos_seq'), job_id bigint NOT NULL, hook text NOT NULL, cause text,
		    tx xid8 NOT NULL DEFAULT pg_current_xact_id());
		CREATE FUNCTION chaos_record_transition() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		    INSERT INTO chaos_transitions (job_id, from_status, to_status, attempt, waiting_on, token, last_error, unfinished_parents)
		    VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status, NEW.attempt_count, NEW.waiting_on,
		            NEW.claim_token, NEW.last_error,
		            CASE WHEN NEW.status = 'PROCESSING' THEN (
		                SELECT count(*) FROM chaos_edges e WHERE e.job_id = NEW.id AND NOT EXISTS (
		                    SELECT 1 FROM chaos_transitions p WHERE p.job_id = e.parent_id AND p.to_status = 'COMPLETED')) END);
		    RETURN NULL;
		END $$;
		CREATE TRIGGER chaos_record_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION chaos_record_transition();
		CREATE TRIGGER chaos_record_transition AFTER UPDATE ON jobs FOR EACH ROW
		    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.claim_token IS DISTINCT FROM NEW.claim_token
		          OR OLD.waiting_on IS DISTINCT FROM NEW.waiting_on)
		    EXECUTE FUNCTION chaos_record_transition()`); err != nil {
		t.Fatal(err)
	}
	return &groupChaos{chaos: c, jobs: map[int64]*member{}, shapes: map[string]int{}, audited: newViolations(), suspects: map[int]bool{}}
}

// recordHooks makes k's Fail and Revive hooks (which may be nil) record each call in
// chaos_hooks, in the transaction they run in.
func recordHooks(k jobqueue.Kind) jobqueue.Kind {
	fail, revive := k.Fail, k.Revive
	k.Fail = func(ctx context.Context, tx pgx.Tx, j jobqueue.Job, cause error) error {
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_hooks (job_id, hook, cause) VALUES ($1, 'fail', $2)`, j.ID, cause.Error()); err != nil {
			return err
		}
		if fail == nil {
			return nil
		}
		return fail(ctx, tx, j, cause)
	}
	k.Revive = func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_hooks (job_id, hook) VALUES ($1, 'revive')`, j.ID); err != nil {
			return err
		}
		if revive == nil {
			return nil
		}
		return revive(ctx, tx, j)
	}
	return k
}

// enqueue creates n groups, 50 to a transaction, each job about a media of its own, the
// group's media of one owner (of 50): a group's domain locks never cross owners.
func (g *groupChaos) enqueue(t *testing.T, n int) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(g.seed, 0x67726f757073)) // "groups"
	if _, err := g.b.pool.Exec(ctx, `INSERT INTO members (id) SELECT g FROM generate_series(1, 50) g ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	for first := 0; first < n; first += 50 {
		err := pgx.BeginFunc(ctx, g.b.pool, func(tx pgx.Tx) error {
			for i := first; i < min(first+50, n); i++ {
				if err := g.enqueueOne(ctx, tx, r, i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.b.pool.Exec(ctx, `INSERT INTO chaos_edges SELECT parent_id, job_id FROM job_dependencies`); err != nil {
		t.Fatal(err)
	}
	edges := 0
	for _, m := range g.jobs {
		edges += len(m.parents)
	}
	if got := g.b.count(t, `SELECT count(*) FROM chaos_edges`); got != edges {
		t.Fatalf("%d edges in job_dependencies, %d enqueued", got, edges)
	}
	t.Logf("groups: %v", g.shapes)
}

func (g *groupChaos) enqueueOne(ctx context.Context, tx pgx.Tx, r *rand.Rand, i int) error {
	rows, err := tx.Query(ctx, `INSERT INTO media (owner_id, title, status, visibility)
		SELECT $1, 'chaos', 'PROCESSING', 'PRIVATE' FROM generate_series(1, 4) RETURNING id`, 1+i%50)
	if err != nil {
		return err
	}
	subjects, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	shape := groupShapes[len(groupShapes)-1]
	for p, s := r.IntN(100), 0; s < len(groupShapes); s++ {
		if p -= groupShapes[s].weight; p < 0 {
			shape = groupShapes[s]
			break
		}
	}
	g.shapes[shape.name]++
	jobs := make([]jobqueue.GroupJob, 4)
	kinds := make([]int, 4)
	for n := range jobs {
		kinds[n] = r.IntN(len(groupKinds))
		jobs[n] = jobqueue.GroupJob{Kind: groupKinds[kinds[n]].name, Subject: subjects[n], MaxAttempts: groupMaxAttempts, After: shape.after[n]}
	}
	ids, err := jobqueue.EnqueueGroup(ctx, tx, jobs)
	if err != nil {
		return err
	}
	for n, id := range ids {
		m := &member{kind: kinds[n], group: len(g.groups), ancestors: map[int64]bool{}}
		for _, p := range shape.after[n] {
			m.parents = append(m.parents, ids[p])
			m.ancestors[ids[p]] = true
			for a := range g.jobs[ids[p]].ancestors {
				m.ancestors[a] = true
			}
		}
		g.jobs[id] = m
	}
	g.groups = append(g.groups, ids)
	g.ids = append(g.ids, ids...)
	return nil
}

// auditSQL finds, in one snapshot, the jobs of a group whose state disagrees with their
// parents': a WAITING job must wait for exactly its parents not COMPLETED (waiting_on), none
// DEAD, and at least one; a claimable, running or COMPLETED job must have every parent
// COMPLETED. A parent retention deleted counts with the status it had.
const auditSQL = `
WITH known AS (
    SELECT id, status FROM jobs
    UNION ALL
    SELECT job_id, status FROM chaos_deleted
), parents AS (
    SELECT e.job_id, count(*) FILTER (WHERE p.status IS DISTINCT FROM 'COMPLETED') AS undone,
           count(*) FILTER (WHERE p.status = 'DEAD') AS dead,
           string_agg(e.parent_id || ' ' || coalesce(p.status, 'unknown'), ', ' ORDER BY e.parent_id) AS seen
    FROM chaos_edges e LEFT JOIN known p ON p.id = e.parent_id
    GROUP BY e.job_id
)
SELECT j.id, j.status, j.waiting_on, p.undone, p.dead, p.seen
FROM jobs j JOIN parents p ON p.job_id = j.id
WHERE (j.status = 'WAITING' AND (j.waiting_on <> p.undone OR p.dead > 0 OR p.undone = 0))
   OR (j.status IN ('PENDING', 'PROCESSING', 'COMPLETED') AND p.undone > 0)`

// audit runs auditSQL every 100–300 ms until ctx ends (its error then is the cancel's: the
// last audit runs after the nodes stopped).
func (g *groupChaos) audit(ctx context.Context) {
	for ctx.Err() == nil {
		_ = g.auditOnce(ctx)
		time.Sleep(g.pause(100*time.Millisecond, 300*time.Millisecond))
	}
}

// auditOnce runs auditSQL once and records what it finds in g.audited.
func (g *groupChaos) auditOnce(ctx context.Context) error {
	rows, err := g.b.pool.Query(ctx, auditSQL)
	if err != nil {
		return err
	}
	type finding struct {
		id                int64
		status            string
		waitingOn, undone int
		dead              int
		parents           string
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (finding, error) {
		var f finding
		err := row.Scan(&f.id, &f.status, &f.waitingOn, &f.undone, &f.dead, &f.parents)
		return f, err
	})
	if err != nil {
		return err
	}
	g.auditMu.Lock()
	defer g.auditMu.Unlock()
	g.audits++
	for _, f := range found {
		invariant := "a WAITING job waits for exactly its parents not COMPLETED (waiting_on), none DEAD"
		if f.status != string(jobqueue.StatusWaiting) {
			invariant = "a PENDING, PROCESSING or COMPLETED job has every parent COMPLETED"
		}
		g.audited.add(invariant, "audit %d: job %d %s waiting_on %d, parents %s", g.audits, f.id, f.status, f.waitingOn, f.parents)
		g.suspects[g.jobs[f.id].group] = true
	}
	return nil
}

// transition is one row of chaos_transitions.
type transition struct {
	seq              int64
	job              int64
	from, to         string // from is "" for the insert
	attempt, waiting int
	token, lastError string
	unfinished       *int // claims only
	tx               string
	at               time.Time
}

// hookCall is one row of chaos_hooks, or of chaos_effects (hook "commit").
type hookCall struct {
	seq             int64
	job             int64
	hook, cause, tx string
	token           string // commit only
}

// chaosLog is what the database recorded of the jobs' changes.
type chaosLog struct {
	byJob map[int64][]transition  // in order
	byTx  map[string][]transition // in order
	calls map[int64][]hookCall    // hooks and effects of each job, in order
	// deleted says when retention deleted a job, for a failure's history.
	deleted map[int64]string
}

// check verifies the invariants after every node stopped.
func (g *groupChaos) check(t *testing.T) {
	ctx := context.Background()
	if err := g.auditOnce(ctx); err != nil {
		t.Fatalf("audit: %v", err)
	}
	v := g.audited
	f := g.facts(t, v)
	l := chaosLog{byJob: map[int64][]transition{}, byTx: map[string][]transition{}, calls: map[int64][]hookCall{}, deleted: map[int64]string{}}
	scan(t, ctx, g.chaos, `SELECT job_id, seq, at, status FROM chaos_deleted`, func(row pgx.CollectableRow) error {
		var id, seq int64
		var at time.Time
		var status string
		err := row.Scan(&id, &seq, &at, &status)
		l.deleted[id] = fmt.Sprintf("%08d %s deleted job %d (%s)", seq, at.Format("15:04:05.000000"), id, status)
		return err
	})
	scan(t, ctx, g.chaos, `SELECT seq, job_id, coalesce(from_status, ''), to_status, attempt, waiting_on, coalesce(token::text, ''),
		coalesce(last_error, ''), unfinished_parents, tx::text, at FROM chaos_transitions ORDER BY seq`, func(row pgx.CollectableRow) error {
		var tr transition
		err := row.Scan(&tr.seq, &tr.job, &tr.from, &tr.to, &tr.attempt, &tr.waiting, &tr.token, &tr.lastError, &tr.unfinished, &tr.tx, &tr.at)
		l.byJob[tr.job] = append(l.byJob[tr.job], tr)
		l.byTx[tr.tx] = append(l.byTx[tr.tx], tr)
		return err
	})
	scan(t, ctx, g.chaos, `SELECT seq, job_id, hook, coalesce(cause, ''), tx::text, '' FROM chaos_hooks
		UNION ALL SELECT seq, job_id, 'commit', '', tx::text, claim_token::text FROM chaos_effects ORDER BY 1`, func(row pgx.CollectableRow) error {
		var h hookCall
		err := row.Scan(&h.seq, &h.job, &h.hook, &h.cause, &h.tx, &h.token)
		l.calls[h.job] = append(l.calls[h.job], h)
		return err
	})

	g.mu.Lock()
	defer g.mu.Unlock()
	var st groupStats
	for _, id := range g.ids {
		before := v.total()
		g.checkJob(v, id, f, l, &st)
		if v.total() > before {
			g.suspects[g.jobs[id].group] = true
		}
	}
	for _, ids := range g.groups {
		done := true
		for _, id := range ids {
			done = done && f.final[id].status == string(jobqueue.StatusCompleted)
		}
		st.groups[one(!done)]++
	}
	runs := g.checkRuns(t, v)
	g.auditMu.Lock()
	audits := g.audits
	g.auditMu.Unlock()
	if audits < 2 {
		v.add("the auditor ran while the chaos did", "%d audits, the last one after the nodes stopped", audits)
	}
	t.Logf("chaos result: %d groups all COMPLETED, %d failed by their rules; jobs %v; %d runs; %d admin retries (%d refused), "+
		"%d descendants revived with them; %d descendants cancelled, %d failed by their rule; %d rows pruned; %d audits",
		st.groups[0], st.groups[1], st.statuses, runs, sum(g.revived), g.refused, st.revivedBelow, st.cancelled, st.failed, f.deleted, audits)
	g.logSuspects(t, l)
	v.report(t)
}

// logSuspects prints the history of the first few suspect groups: every transition of their
// jobs and every hook, in order, with the transactions that made them.
func (g *groupChaos) logSuspects(t *testing.T, l chaosLog) {
	groups := slices.Sorted(maps.Keys(g.suspects))
	for _, i := range groups[:min(len(groups), 4)] {
		ids := g.groups[i]
		var lines []string
		for _, id := range ids {
			m := g.jobs[id]
			b, _ := g.behaviourOf(id)
			lines = append(lines, fmt.Sprintf("job %d %s, parents %v, %s, %d admin retries", id, groupKinds[m.kind].name, m.parents, b, g.revived[id]))
		}
		var events []string
		for _, id := range ids {
			for _, tr := range l.byJob[id] {
				unfinished := ""
				if tr.unfinished != nil {
					unfinished = fmt.Sprintf(" unfinished parents %d", *tr.unfinished)
				}
				events = append(events, fmt.Sprintf("%08d %s tx %s job %d %s → %s attempt %d waiting_on %d%s %q",
					tr.seq, tr.at.Format("15:04:05.000000"), tr.tx, id, tr.from, tr.to, tr.attempt, tr.waiting, unfinished, tr.lastError))
			}
			if d, ok := l.deleted[id]; ok {
				events = append(events, d)
			}
			for _, h := range l.calls[id] {
				events = append(events, fmt.Sprintf("%08d tx %s job %d hook %s %q", h.seq, h.tx, id, h.hook, h.cause))
			}
			for _, r := range g.runs[id] {
				events = append(events, fmt.Sprintf("-------- %s job %d run attempt %d until %s", r.start.Format("15:04:05.000000"), id, r.attempt, r.end.Format("15:04:05.000000")))
			}
		}
		slices.Sort(events)
		t.Logf("group %d:\n\t%s\n\t%s", i, strings.Join(lines, "\n\t"), strings.Join(events, "\n\t"))
	}
}

type groupStats struct {
	groups                          [2]int // all COMPLETED, failed
	statuses                        map[string]int
	revivedBelow, cancelled, failed int
}

// hookKey is a hook expected or called: its transaction and its name.
type hookKey struct{ tx, hook string }

// checkJob checks job id's transitions, hooks, effects, media and runs. g.mu is held.
func (g *groupChaos) checkJob(v *violations, id int64, f chaosFacts, l chaosLog, st *groupStats) {
	m, trs, byTx := g.jobs[id], l.byJob[id], l.byTx
	spec := groupKinds[m.kind]
	j, ok := f.final[id]
	if st.statuses == nil {
		st.statuses = map[string]int{}
	}
	st.statuses[j.status]++
	if !ok || (j.status != string(jobqueue.StatusCompleted) && j.status != string(jobqueue.StatusDead)) {
		v.add("every job ends COMPLETED or DEAD (none stuck)", "job %d ended %q (row present: %v)", id, j.status, ok)
	}
	if len(trs) == 0 {
		v.add("every change of a job is recorded", "job %d has no transition", id)
		return
	}
	if last := trs[len(trs)-1].to; last != j.status {
		v.add("every change of a job is recorded", "job %d ended %s, its last transition to %s", id, j.status, last)
	}
	want := map[hookKey]int{}
	direct, below, completions := 0, 0, []transition{}
	for i, tr := range trs {
		switch {
		case i == 0:
			wantStatus := string(jobqueue.StatusPending)
			if len(m.parents) > 0 {
				wantStatus = string(jobqueue.StatusWaiting)
			}
			if tr.from != "" || tr.to != wantStatus || tr.waiting != len(m.parents) {
				v.add("a job of a group is enqueued WAITING for its parents, PENDING without", "job %d: %s waiting on %d, %d parents", id, tr.to, tr.waiting, len(m.parents))
			}
		case tr.to == string(jobqueue.StatusProcessing):
			if tr.from != string(jobqueue.StatusPending) && tr.from != string(jobqueue.StatusProcessing) {
				v.add("no unexpected transition", "job %d: %s → PROCESSING", id, tr.from)
			}
			if tr.unfinished == nil {
				v.add("every change of a job is recorded", "job %d: claim without its parents' count", id)
			} else if *tr.unfinished != 0 {
				v.add("no job is claimed before each of its parents' completion committed", "job %d claimed (attempt %d) with %d of its parents %v not completed", id, tr.attempt, *tr.unfinished, m.parents)
			}
		case tr.to == string(jobqueue.StatusCompleted):
			completions = append(completions, tr)
			if tr.from != string(jobqueue.StatusProcessing) {
				v.add("a job completes only from PROCESSING", "job %d: %s → COMPLETED", id, tr.from)
			}
		case tr.to == string(jobqueue.StatusDead) && tr.from == string(jobqueue.StatusProcessing):
			if b, _ := g.behaviourOf(id); tr.attempt < groupMaxAttempts && b != permanent {
				v.add("a job goes DEAD on its own only once its attempts ended (or permanently failed)", "job %d DEAD at attempt %d of %d (%q)", id, tr.attempt, groupMaxAttempts, tr.lastError)
			}
			if spec.hooks {
				want[hookKey{tr.tx, "fail"}]++
			}
		case tr.to == string(jobqueue.StatusDead) && tr.from == string(jobqueue.StatusWaiting):
			if g.ancestorIn(m, byTx[tr.tx], func(a transition) bool { return a.to == string(jobqueue.StatusDead) }) == 0 {
				v.add("a WAITING job goes DEAD only with an ancestor, in its transaction", "job %d DEAD from WAITING (%q), no ancestor of %v DEAD in that transaction", id, tr.lastError, m.parents)
			}
			if spec.rule == jobqueue.FailWhenParentDead {
				st.failed++
				if spec.hooks {
					want[hookKey{tr.tx, "fail"}]++
				}
			} else {
				st.cancelled++
			}
		case tr.to == string(jobqueue.StatusDead):
			v.add("a job goes DEAD only from PROCESSING (its attempts) or WAITING (an ancestor's death)", "job %d: %s → DEAD", id, tr.from)
		case tr.from == string(jobqueue.StatusDead):
			// Revived by an admin retry of its group (RetryDead retries every DEAD job of the
			// group that nothing DEAD blocks, in one transaction): retried itself when no
			// ancestor of it is revived in that transaction, else a never-run descendant
			// revived with one.
			revivedAncestors := g.ancestorIn(m, byTx[tr.tx], func(a transition) bool { return a.from == string(jobqueue.StatusDead) })
			if revivedAncestors == 0 {
				direct++
				if spec.hooks {
					want[hookKey{tr.tx, "revive"}]++
				}
				break
			}
			below++
			st.revivedBelow++
			if tr.attempt != 0 {
				v.add("an admin retry revives only the never-run descendants of the jobs it retries", "job %d (attempt %d) revived with an ancestor, ancestors %v", id, tr.attempt, m.parents)
			}
			if spec.hooks && spec.rule == jobqueue.FailWhenParentDead {
				want[hookKey{tr.tx, "revive"}]++
			}
		case tr.from == string(jobqueue.StatusWaiting):
			// Counted one parent fewer (or released) by a parent's completion.
			if tr.waiting >= trs[i-1].waiting || g.parentIn(m, byTx[tr.tx], string(jobqueue.StatusCompleted)) == 0 {
				v.add("a WAITING job counts down only with a parent's completion, in its transaction", "job %d: WAITING %d → %s %d, parents %v", id, trs[i-1].waiting, tr.to, tr.waiting, m.parents)
			}
		case tr.from == string(jobqueue.StatusProcessing) && tr.to == string(jobqueue.StatusPending):
			// A retry after a failed attempt, or a release on a graceful stop.
		default:
			v.add("no unexpected transition", "job %d: %s → %s (waiting_on %d)", id, tr.from, tr.to, tr.waiting)
		}
	}
	if direct+below < g.revived[id] {
		v.add("every admin retry that succeeded revived its job", "job %d revived %d times (%d retried itself, %d with an ancestor), %d retries of it succeeded",
			id, direct+below, direct, below, g.revived[id])
	}
	completed := j.status == string(jobqueue.StatusCompleted)
	if len(completions) != one(completed) {
		v.add("a job completes once, and a COMPLETED job did", "job %d %s completed %d times", id, j.status, len(completions))
	}
	if completed {
		for _, p := range m.parents {
			if f.final[p].status != string(jobqueue.StatusCompleted) {
				v.add("a COMPLETED job's parents are COMPLETED", "job %d COMPLETED, its parent %d %s", id, p, f.final[p].status)
			}
		}
	}
	g.checkHooks(v, id, f, want, l.calls[id], completions)
	g.checkStarts(v, id, m, l.byJob)
	checkAttempts(v, id, j)
}

// ancestorIn counts the transitions of trs that are m's ancestors' and match.
func (g *groupChaos) ancestorIn(m *member, trs []transition, match func(transition) bool) int {
	n := 0
	for _, tr := range trs {
		if m.ancestors[tr.job] && match(tr) {
			n++
		}
	}
	return n
}

// parentIn counts the transitions to status of m's parents in trs.
func (g *groupChaos) parentIn(m *member, trs []transition, status string) int {
	n := 0
	for _, tr := range trs {
		if slices.Contains(m.parents, tr.job) && tr.to == status {
			n++
		}
	}
	return n
}

// checkHooks compares the hooks that ran for job id (calls, with its completions' effects)
// with those its transitions call for (want), and, for a media kind, its media row and
// outbox with the hooks that ran: FAILED after a Fail, PROCESSING after a Revive (or none),
// READY after its completion, one outbox row per Fail and per completion.
func (g *groupChaos) checkHooks(v *violations, id int64, f chaosFacts, want map[hookKey]int, calls []hookCall, completions []transition) {
	spec := groupKinds[g.jobs[id].kind]
	got := map[hookKey]int{}
	mediaStatus, failed, effects := media.StatusProcessing, 0, 0
	for _, h := range calls {
		switch h.hook {
		case "commit":
			effects++
			mediaStatus = media.StatusReady
			if len(completions) != 1 || completions[0].tx != h.tx || completions[0].token != h.token {
				v.add("one effect per committed completion, in its transaction", "job %d: effect of claim %s in transaction %s, completions %v", id, h.token, h.tx, completions)
			}
			continue
		case "fail":
			failed++
			mediaStatus = media.StatusFailed
		case "revive":
			mediaStatus = media.StatusProcessing
		}
		got[hookKey{h.tx, h.hook}]++
	}
	if spec.media && effects != len(completions) {
		v.add("one effect per committed completion, in its transaction", "job %d: %d effects, %d completions", id, effects, len(completions))
	}
	for k, n := range want {
		if got[k] != n {
			v.add("the hooks of each death and revival are the rule's", "job %d (%s): %s hook ran %d times in transaction %s, want %d", id, spec.name, k.hook, got[k], k.tx, n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			v.add("the hooks of each death and revival are the rule's", "job %d (%s): %s hook ran %d times in transaction %s, want none", id, spec.name, k.hook, n, k.tx)
		}
	}
	if !spec.media {
		return
	}
	j := f.final[id]
	m := f.media[j.subject]
	if m.status != string(mediaStatus) {
		v.add("a media kind's media is as its last hook left it", "job %d %s: media %d %s, want %s", id, j.status, j.subject, m.status, mediaStatus)
	}
	if out := f.outbox[j.subject]; out[media.OutboxFailed] != failed || out[media.OutboxReady] != effects {
		v.add("one outbox row per Fail hook and per completion", "job %d: outbox %v, want %d failed and %d ready", id, out, failed, effects)
	}
	if j.status == string(jobqueue.StatusCompleted) {
		checkOutputs(v, id, j.subject, m)
	}
}

// checkStarts checks that every run of job id started after each of its parents' completion
// committed (its transition, recorded in its transaction, is earlier than the run's start).
func (g *groupChaos) checkStarts(v *violations, id int64, m *member, byJob map[int64][]transition) {
	completedAt := map[int64]time.Time{}
	for _, p := range m.parents {
		for _, tr := range byJob[p] {
			if tr.to == string(jobqueue.StatusCompleted) {
				completedAt[p] = tr.at
			}
		}
	}
	for _, r := range g.runs[id] {
		for _, p := range m.parents {
			if at, ok := completedAt[p]; !ok || !at.Before(r.start) {
				v.add("no job starts a run before each of its parents' completion committed", "job %d attempt %d started %s; parent %d completed %v (%s)",
					id, r.attempt, r.start.Format("15:04:05.000000"), p, ok, at.Format("15:04:05.000000"))
			}
		}
	}
}
