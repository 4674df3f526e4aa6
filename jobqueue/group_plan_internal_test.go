package jobqueue

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
)

// A claim reads no WAITING job, however many wait: a job with parents is outside both
// claimable indexes until its last parent completes. The claim of 10 jobs, with 1 000 jobs
// claimable, is analysed with 50 000 WAITING jobs of the same kind (each with a parent): the
// rows of jobs it looks at (those its scans return and those they drop for a filter) must be
// about what the claim takes, as with no job waiting, and no scan of jobs may be sequential.
// Rows, not time.
func TestClaimSQL_WaitingJobsAreNeverRead(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const claimable, waiting, limit = 1000, 50_000, 10
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (kind, subject_id, max_attempts) SELECT 'encode', g, 3 FROM generate_series(1, $1::int) g`, claimable); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	claim := func() plantest.Node {
		return plantest.Analyze(t, pool, claimSQL, "encode", "node", limit, time.Minute, DefaultLostLeaseBackoff, LostLeaseBackoffCap, DefaultMaxLostLeases)
	}
	before := claim()
	if _, err := pool.Exec(ctx, `
		WITH parent AS (INSERT INTO jobs (kind, subject_id, max_attempts, group_id) VALUES ('probe', 0, 3, 0) RETURNING id),
		kids AS (INSERT INTO jobs (kind, subject_id, max_attempts, status, waiting_on, group_id)
		         SELECT 'encode', g, 3, 'WAITING', 1, (SELECT id FROM parent) FROM generate_series(1, $1::int) g RETURNING id)
		INSERT INTO job_dependencies (parent_id, job_id) SELECT (SELECT id FROM parent), id FROM kids`, waiting); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	after := claim()
	readBefore, readAfter := before.RowsExaminedFrom("jobs"), after.RowsExaminedFrom("jobs")
	t.Logf("a claim of %d looked at %.0f rows of jobs with no job waiting, %.0f with %d WAITING", limit, readBefore, readAfter, waiting)
	if readAfter > 3*limit || readAfter > 3*readBefore || slices.Contains(after.SeqScans(), "jobs") {
		out, _ := json.MarshalIndent(after, "", " ")
		t.Fatalf("with %d WAITING jobs a claim read %.0f rows of jobs (%.0f without them), sequential scans %v; plan:\n%s",
			waiting, readAfter, readBefore, after.SeqScans(), out)
	}
}
