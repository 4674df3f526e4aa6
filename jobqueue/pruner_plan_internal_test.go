package jobqueue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
)

// One prune batch reads about a batch of rows, however large the backlog of finished jobs:
// with the status and age repeated on the outer DELETE (the first fix of bug 2), PostgreSQL
// joined the batch's ids against every finished row past its retention, so each batch of a
// backlog read the whole backlog (a prune of N rows read N²/batch). Rows, not time, are
// counted: EXPLAIN ANALYZE's actual rows of every scan of jobs, in a transaction rolled back.
func TestPruneSQL_OneBatchReadsABatch(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const backlog, batch = 100_000, 1000
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (kind, subject_id, max_attempts, status, completed_at)
		SELECT 'encode', g, 3, 'COMPLETED', statement_timestamp() - interval '8 days' - g * interval '1 second'
		FROM generate_series(1, $1::int) g`, backlog); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		t.Fatal(err)
	}
	plan := plantest.Analyze(t, pool, pruneSQL, StatusCompleted, 7*24*time.Hour, batch)
	read := plan.RowsReadFrom("jobs")
	t.Logf("one prune batch of %d read %.0f rows of jobs, with %d finished jobs past retention", batch, read, backlog)
	if read > 3*batch {
		out, _ := json.MarshalIndent(plan, "", " ")
		t.Fatalf("one batch of %d read %.0f rows of jobs with %d finished jobs past retention, want about a batch; plan:\n%s",
			batch, read, backlog, out)
	}
}
