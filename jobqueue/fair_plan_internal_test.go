package jobqueue

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
)

// sortedRows is the most rows any Sort node of the plan sorted.
func sortedRows(n plantest.Node) float64 {
	most := 0.0
	if n.NodeType == "Sort" {
		most = n.ActualRows * n.ActualLoops
	}
	for _, child := range n.Plans {
		most = max(most, sortedRows(child))
	}
	return most
}

// addPending inserts n PENDING jobs of kind spread over the given number of partitions, each
// partition's jobs on consecutive turns from 1, as Insert gives a backlog.
func addPending(t *testing.T, pool *pgxpool.Pool, kind string, n, partitions int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (kind, subject_id, max_attempts, partition_key, priority, fair_turn)
		SELECT $1, g, 3, 'p' || (g % $3), 1 + g % 3, 1 + g / $3 FROM generate_series(1, $2::int) g`, kind, n, partitions); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
}

// The claim is one scan of jobs_pending_kind_idx in claim order that stops at its limit:
// the rows of jobs it looks at are about what it takes, whether 1 000 jobs wait in 10
// partitions or 51 000 in 5 000 (with 50 000 of another kind besides), it sorts only the
// handful of rows its two scans return, and it reads no table sequentially. The same holds
// for a kind with a cluster-wide limit, whose count reads only the kind's running jobs.
// Rows, not time.
func TestClaimSQL_CostIndependentOfPartitionsAndBacklog(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	const limit = 10
	// Claim runs the generic plan (see Claim); the custom plan is checked too, for a caller
	// that runs the statement otherwise.
	claim := func(limited, generic bool) plantest.Node {
		analyze := plantest.Analyze
		if generic {
			analyze = plantest.AnalyzeGeneric
		}
		if limited {
			return analyze(t, pool, limitedClaimSQL, "encode", "node", limit, time.Minute,
				DefaultLostLeaseBackoff, LostLeaseBackoffCap, DefaultMaxLostLeases, 100)
		}
		return analyze(t, pool, claimSQL, "encode", "node", limit, time.Minute,
			DefaultLostLeaseBackoff, LostLeaseBackoffCap, DefaultMaxLostLeases)
	}
	addPending(t, pool, "encode", 1000, 10)
	before, beforeLimited := claim(false, false), claim(true, false)
	beforeGeneric, beforeLimitedGeneric := claim(false, true), claim(true, true)
	addPending(t, pool, "encode", 50_000, 5000)
	addPending(t, pool, "other", 50_000, 5000)
	for name, c := range map[string]struct{ before, after plantest.Node }{
		"claim":                       {before, claim(false, false)},
		"limited claim":               {beforeLimited, claim(true, false)},
		"claim, generic plan":         {beforeGeneric, claim(false, true)},
		"limited claim, generic plan": {beforeLimitedGeneric, claim(true, true)},
	} {
		readBefore, readAfter := c.before.RowsExaminedFrom("jobs"), c.after.RowsExaminedFrom("jobs")
		t.Logf("%s of %d: %.0f rows of jobs looked at with 1 000 jobs in 10 partitions, %.0f with 51 000 in 5 000; %.0f rows sorted",
			name, limit, readBefore, readAfter, sortedRows(c.after))
		if readAfter > 3*limit || readAfter > 3*readBefore || sortedRows(c.after) > 2*limit || slices.Contains(c.after.SeqScans(), "jobs") {
			out, _ := json.MarshalIndent(c.after, "", " ")
			t.Fatalf("%s with 51 000 jobs in 5 000 partitions read %.0f rows of jobs (%.0f with 1 000), sorted %.0f, sequential scans %v; plan:\n%s",
				name, readAfter, readBefore, sortedRows(c.after), c.after.SeqScans(), out)
		}
	}
}

// Due-ness is a filter on the claim-order scan: jobs waiting out a retry's back-off that sort
// ahead of the first due job are looked at and passed over, so the claim's cost grows with
// them, not with the backlog behind, and so does an enqueue's, whose virtual time is the first
// due job's turn. The test measures it: 500 such jobs cost about 500 rows.
func TestClaimSQL_JobsInBackoffAheadAreReadOnce(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const limit, backoff = 10, 500
	addPending(t, pool, "encode", 10_000, 100)
	if _, err := pool.Exec(ctx, `UPDATE jobs SET available_at = statement_timestamp() + interval '1 hour'
		WHERE id IN (SELECT id FROM jobs WHERE kind = 'encode' ORDER BY claim_order, id LIMIT $1)`, backoff); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	plan := plantest.Analyze(t, pool, claimSQL, "encode", "node", limit, time.Minute,
		DefaultLostLeaseBackoff, LostLeaseBackoffCap, DefaultMaxLostLeases)
	read := plan.RowsExaminedFrom("jobs")
	t.Logf("a claim of %d with %d jobs in back-off ahead (of 10 000) looked at %.0f rows of jobs", limit, backoff, read)
	if read < backoff || read > backoff+3*limit {
		t.Fatalf("the claim looked at %.0f rows, want the %d in back-off and about %d more", read, backoff, limit)
	}
	// An enqueue's virtual time is the first due job's turn: it passes over the same jobs.
	insert := plantest.Analyze(t, pool, insertSQL, "encode", 1, 3, nil, "p7", 2, nil)
	read = insert.RowsExaminedFrom("jobs")
	t.Logf("an insert with %d jobs in back-off ahead looked at %.0f rows of jobs", backoff, read)
	if read < backoff || read > backoff+5 || slices.Contains(insert.SeqScans(), "jobs") {
		out, _ := json.MarshalIndent(insert, "", " ")
		t.Fatalf("the insert looked at %.0f rows, sequential scans %v, want the %d in back-off and a probe or two; plan:\n%s",
			read, insert.SeqScans(), backoff, out)
	}
}

// Enqueue's turn costs two index probes and a read of the kind's running jobs, whatever the
// backlog and the number of partitions.
func TestInsertSQL_TurnIsIndexProbes(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const running = 20
	addPending(t, pool, "encode", 50_000, 5000)
	if _, err := pool.Exec(ctx, `UPDATE jobs SET status = 'PROCESSING', claim_token = gen_random_uuid(), lease_until = statement_timestamp() + interval '1 minute'
		WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT $1)`, running); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	plan := plantest.Analyze(t, pool, insertSQL, "encode", 1, 3, nil, "p7", 2, nil)
	read := plan.RowsExaminedFrom("jobs")
	t.Logf("an insert with 50 000 jobs in 5 000 partitions and %d running looked at %.0f rows of jobs", running, read)
	if read > running+5 || slices.Contains(plan.SeqScans(), "jobs") {
		out, _ := json.MarshalIndent(plan, "", " ")
		t.Fatalf("the insert looked at %.0f rows of jobs, sequential scans %v, want the %d running and a probe or two; plan:\n%s",
			read, plan.SeqScans(), running, out)
	}
}
