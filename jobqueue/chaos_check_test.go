package jobqueue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// violations collects the breaches of each invariant, with a few examples.
type violations struct {
	count    map[string]int
	examples map[string][]string
}

func newViolations() *violations {
	return &violations{count: map[string]int{}, examples: map[string][]string{}}
}

// report fails t with each invariant broken, by name.
func (v *violations) report(t *testing.T) {
	names := make([]string, 0, len(v.count))
	for name := range v.count {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Errorf("invariant %q broken %d times, e.g. %v", name, v.count[name], v.examples[name])
	}
}

// total is how many breaches there are.
func (v *violations) total() int {
	n := 0
	for _, c := range v.count {
		n += c
	}
	return n
}

func (v *violations) add(invariant, format string, args ...any) {
	v.count[invariant]++
	if len(v.examples[invariant]) < 5 {
		v.examples[invariant] = append(v.examples[invariant], fmt.Sprintf(format, args...))
	}
}

// finalJob is a job's end state: its row, or the row retention deleted.
type finalJob struct {
	subject  int64
	status   string
	attempts int
	max      int
	deleted  bool
}

// mediaRow is a media row at the end.
type mediaRow struct{ status, hls string }

// chaosFacts are what the database holds at the end of a chaos test.
type chaosFacts struct {
	// final is every job's end state, by id: its row, or the row retention deleted.
	final   map[int64]finalJob
	deleted int
	media   map[int64]mediaRow
	// outbox counts the notification rows of each media, by kind.
	outbox map[int64]map[string]int
	// effects counts the effect rows of each job.
	effects map[int64]int
}

// facts reads the end state, and checks that retention deleted only finished rows.
func (c *chaos) facts(t *testing.T, v *violations) chaosFacts {
	ctx := context.Background()
	f := chaosFacts{final: map[int64]finalJob{}, media: map[int64]mediaRow{}, outbox: map[int64]map[string]int{}, effects: map[int64]int{}}
	scan(t, ctx, c, `SELECT id, subject_id, status, attempt_count, max_attempts FROM jobs`, func(row pgx.CollectableRow) error {
		var id int64
		var j finalJob
		err := row.Scan(&id, &j.subject, &j.status, &j.attempts, &j.max)
		f.final[id] = j
		return err
	})
	scan(t, ctx, c, `SELECT job_id, subject_id, status FROM chaos_deleted`, func(row pgx.CollectableRow) error {
		var id int64
		j := finalJob{deleted: true}
		if err := row.Scan(&id, &j.subject, &j.status); err != nil {
			return err
		}
		f.deleted++
		if j.status != string(jobqueue.StatusCompleted) && j.status != string(jobqueue.StatusDead) {
			v.add("retention deletes only finished rows", "job %d deleted while %s", id, j.status)
		}
		f.final[id] = j
		return nil
	})
	scan(t, ctx, c, `SELECT id, status, coalesce(hls_key, '') FROM media`, func(row pgx.CollectableRow) error {
		var id int64
		var m mediaRow
		err := row.Scan(&id, &m.status, &m.hls)
		f.media[id] = m
		return err
	})
	scan(t, ctx, c, `SELECT media_id, kind, count(*) FROM notification_outbox GROUP BY 1, 2`, func(row pgx.CollectableRow) error {
		var id int64
		var kind string
		var n int
		err := row.Scan(&id, &kind, &n)
		if f.outbox[id] == nil {
			f.outbox[id] = map[string]int{}
		}
		f.outbox[id][kind] = n
		return err
	})
	scan(t, ctx, c, `SELECT job_id, count(*) FROM chaos_effects GROUP BY 1`, func(row pgx.CollectableRow) error {
		var id int64
		var n int
		err := row.Scan(&id, &n)
		f.effects[id] = n
		return err
	})
	return f
}

// check verifies the invariants after every node stopped.
func (c *chaos) check(t *testing.T) {
	v := newViolations()
	f := c.facts(t, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	statuses := map[string]int{}
	for _, id := range c.ids {
		j, ok := f.final[id]
		statuses[j.status]++
		completed, dead := j.status == string(jobqueue.StatusCompleted), j.status == string(jobqueue.StatusDead)
		if !ok || !(completed || dead) {
			v.add("every job ends COMPLETED or DEAD", "job %d ended %q (row present: %v)", id, j.status, ok)
			continue
		}
		if want := one(completed); f.effects[id] != want {
			v.add("no job's effect happens twice (and a COMPLETED job's happened)", "job %d %s has %d effects", id, j.status, f.effects[id])
		}
		m := f.media[j.subject]
		if dead && m.status != string(media.StatusFailed) {
			v.add("a DEAD job's media is FAILED", "job %d DEAD, media %d %s", id, j.subject, m.status)
		}
		if completed && m.status != string(media.StatusReady) {
			v.add("a COMPLETED job's media is READY", "job %d COMPLETED, media %d %s", id, j.subject, m.status)
		}
		wantFailed := c.revived[id] + one(dead)
		wantReady := one(completed)
		if got := f.outbox[j.subject]; got[media.OutboxFailed] != wantFailed || got[media.OutboxReady] != wantReady {
			v.add("one outbox row per terminal transition", "job %d %s revived %d times: outbox %v, want %d failed and %d ready",
				id, j.status, c.revived[id], got, wantFailed, wantReady)
		}
		if completed {
			checkOutputs(v, id, j.subject, m)
		}
		// A good job spends its own failures' attempts and no other: one, or two for a flaky
		// one (it fails its first). The faults only take its leases, and a lost lease spends
		// no attempt, so it never goes DEAD.
		// The runs say it when retention deleted the row.
		if b, _ := c.behaviourOf(id); b != failing && b != permanent && (!completed || lastAttempt(c.runs[id]) != 1+one(b == flaky)) {
			v.add("a good job completes on the attempts of its own failures (a lost lease spends none)",
				"job %d (%s) ended %s; its runs went up to attempt %d", id, b, j.status, lastAttempt(c.runs[id]))
		}
		checkAttempts(v, id, j)
	}
	runs := c.checkRuns(t, v)
	t.Logf("chaos result: %v; %d runs, %d admin retries (%d refused), %d rows pruned", statuses, runs, sum(c.revived), c.refused, f.deleted)
	v.report(t)
}

// lastAttempt is the highest attempt number of runs.
func lastAttempt(runs []*run) int {
	n := 0
	for _, r := range runs {
		n = max(n, r.attempt)
	}
	return n
}

// checkOutputs checks that the outputs of job id, COMPLETED, exist where its media m records
// them.
func checkOutputs(v *violations, id, subject int64, m mediaRow) {
	if _, err := os.Stat(filepath.Join(m.hls, "out")); err != nil || m.hls == "" {
		v.add("a COMPLETED job's outputs exist", "job %d: media %d output %q: %v", id, subject, m.hls, err)
	}
}

// checkAttempts checks the final attempt count of job id, when its row is left.
func checkAttempts(v *violations, id int64, j finalJob) {
	if !j.deleted && j.attempts > j.max {
		v.add("attempts never exceed the maximum", "job %d: %d attempts of %d", id, j.attempts, j.max)
	}
}

// checkRuns checks every run the test saw: within the attempts, and no two runs of a job at
// once (unless one ignored its cancellation, or a step of the wall clock expired the first
// one's lease under it: see clockSteps). It returns how many runs there were. c.mu is held.
func (c *chaos) checkRuns(t *testing.T, v *violations) int {
	c.clock.sample() // a step since the watch's last tick
	runs, excused := 0, 0
	for id, rs := range c.runs {
		runs += len(rs)
		for _, r := range rs {
			if r.attempt > r.max {
				v.add("attempts never exceed the maximum", "job %d ran attempt %d of %d", id, r.attempt, r.max)
			}
		}
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				first, second := a, b
				if second.start.Before(first.start) {
					first, second = second, first
				}
				if first.ignoresCancel || !first.end.After(second.start) {
					continue
				}
				if step, ok := c.clock.explains(first.start, first.end, second.start); ok {
					excused++
					t.Logf("job %d: attempt %d ran until %s, attempt %d started %s, after the wall clock stepped %s: excused",
						id, first.attempt, first.end.Format("15:04:05.000"), second.attempt, second.start.Format("15:04:05.000"), step.by)
				} else {
					v.add("no two runs of a job at once (unless one ignored its cancellation)",
						"job %d: attempt %d ran until %s, attempt %d started %s", id, first.attempt,
						first.end.Format("15:04:05.000"), second.attempt, second.start.Format("15:04:05.000"))
				}
			}
		}
	}
	if steps := c.clock.all(); len(steps) > 0 {
		t.Logf("the wall clock stepped forward %d times during the test (the first by %s): %d overlapping runs excused",
			len(steps), steps[0].by, excused)
	}
	return runs
}

func sum(m map[int64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func scan(t *testing.T, ctx context.Context, c *chaos, sql string, each func(pgx.CollectableRow) error) {
	t.Helper()
	rows, err := c.b.pool.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) { return struct{}{}, each(row) }); err != nil {
		t.Fatal(err)
	}
}

// one is 1 when b holds, else 0.
func one(b bool) int {
	if b {
		return 1
	}
	return 0
}
