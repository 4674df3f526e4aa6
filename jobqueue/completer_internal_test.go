package jobqueue

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
)

// The batch's statement checks each part of the fence for each job on its own: a job whose row
// fails any one of them (another job's id under its token, a status that is not PROCESSING,
// another claim's token, an expired lease) is reported lost and its row is left as it was,
// while the rest of the batch completes. A job offered under an old claim and its current one
// in the same batch is lost under the old and completed under the current. The batch is
// shuffled: each job's answer is its own, whatever order the rows come back in.
func TestCompleteBatch_FenceChecksEachPart(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	q, err := NewQueue(pool, time.Minute, Kind{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (kind, subject_id, max_attempts) SELECT 'plain', g, 3 FROM generate_series(1, 7) g`); err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(ctx, "plain", 7, "n")
	if err != nil || len(claimed) != 7 {
		t.Fatalf("claimed %d jobs (%v), want 7", len(claimed), err)
	}
	good, other, wrongID, notProcessing, stolen, expired, reclaimed := claimed[0], claimed[1], claimed[2], claimed[3], claimed[4], claimed[5], claimed[6]

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Past the lost-lease back-off too, so that a claim may take the job.
	expire := func(id int64) {
		t.Helper()
		exec(`UPDATE jobs SET lease_until = statement_timestamp() - $2::interval WHERE id = $1`, id, LostLeaseBackoffCap+time.Millisecond)
	}
	// Id: a job value carrying another live claim's token (other is not in the batch).
	forged := Job{ID: wrongID.ID, Kind: "plain", ClaimToken: other.ClaimToken}
	// Status: the row is no longer PROCESSING, though token and lease are still ours.
	exec(`UPDATE jobs SET status = 'DEAD' WHERE id = $1`, notProcessing.ID)
	// Token: the lease expired and another node claimed the job; its lease is live again.
	expire(stolen.ID)
	thief, err := NewQueue(pool, time.Minute, Kind{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	byThief, err := thief.Claim(ctx, "plain", 1, "thief")
	if err != nil || len(byThief) != 1 || byThief[0].ID != stolen.ID {
		t.Fatalf("the thief claimed %v (%v), want job %d", byThief, err, stolen.ID)
	}
	// The same job twice: an old claim of this node, and the current one.
	expire(reclaimed.ID)
	again, err := q.Claim(ctx, "plain", 1, "n")
	if err != nil || len(again) != 1 || again[0].ID != reclaimed.ID {
		t.Fatalf("the re-claim took %v (%v), want job %d", again, err, reclaimed.ID)
	}
	// Lease: expired (after the claims above, so that neither took it), nobody claimed it since.
	expire(expired.ID)

	type want struct {
		job  Job
		lost bool
	}
	batch := []want{
		{good, false}, {forged, true}, {notProcessing, true}, {stolen, true}, {expired, true},
		{reclaimed, true}, {again[0], false},
	}
	rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	jobs := make([]Job, len(batch))
	for i, w := range batch {
		jobs[i] = w.job
	}
	results, err := q.completeBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range batch {
		if lost := errors.Is(results[i], ErrClaimLost); lost != w.lost || (!lost && results[i] != nil) {
			t.Errorf("job %d under %s: %v, want lost %v", w.job.ID, w.job.ClaimToken, results[i], w.lost)
		}
	}

	rows := jobRows(t, pool)
	check := func(what string, id int64, status Status, token string) {
		t.Helper()
		if got := rows[id]; got.status != status || got.token != token {
			t.Errorf("%s (job %d) is %s under %s, want %s under %s", what, id, got.status, got.token, status, token)
		}
	}
	check("the good job", good.ID, StatusCompleted, good.ClaimToken)
	check("the job whose token was forged", wrongID.ID, StatusProcessing, wrongID.ClaimToken)
	check("the job whose token the forged one carried", other.ID, StatusProcessing, other.ClaimToken)
	check("the job no longer PROCESSING", notProcessing.ID, StatusDead, notProcessing.ClaimToken)
	check("the stolen job", stolen.ID, StatusProcessing, byThief[0].ClaimToken)
	check("the job whose lease expired", expired.ID, StatusProcessing, expired.ClaimToken)
	check("the re-claimed job", reclaimed.ID, StatusCompleted, again[0].ClaimToken)
}

type jobRow struct {
	status Status
	token  string
}

func jobRows(t *testing.T, pool *pgxpool.Pool) map[int64]jobRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, status, coalesce(claim_token::text, '') FROM jobs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]jobRow{}
	for rows.Next() {
		var id int64
		var r jobRow
		if err := rows.Scan(&id, &r.status, &r.token); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
