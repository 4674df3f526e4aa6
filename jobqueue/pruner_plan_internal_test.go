package jobqueue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
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
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+pruneSQL, StatusCompleted, 7*24*time.Hour, batch).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(plan))
	}
	read := plan[0].Plan.rowsReadFrom("jobs")
	t.Logf("one prune batch of %d read %.0f rows of jobs, with %d finished jobs past retention", batch, read, backlog)
	if read > 3*batch {
		out, _ := json.MarshalIndent(plan[0].Plan, "", " ")
		t.Fatalf("one batch of %d read %.0f rows of jobs with %d finished jobs past retention, want about a batch; plan:\n%s",
			batch, read, backlog, out)
	}
}

// planNode is the part of EXPLAIN's JSON a row count needs.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

// rowsReadFrom sums the rows every scan of relation returned, over all its loops.
func (n planNode) rowsReadFrom(relation string) float64 {
	var rows float64
	if n.RelationName == relation && n.NodeType != "ModifyTable" {
		rows += n.ActualRows * n.ActualLoops
	}
	for _, child := range n.Plans {
		rows += child.rowsReadFrom(relation)
	}
	return rows
}
