package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/plantest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/webhooks"
)

// historyRow is one outbox row of a retention test, with its delivery (status "" for none).
type historyRow struct {
	name          string
	age           time.Duration // of the outbox row, and of the delivery's end
	relayed       bool
	delivery      string // WAITING, QUEUED, DELIVERED, DEAD, or "" for none
	outboxStays   bool
	deliveryStays bool
}

// Each row of the event history is pruned by its own rule: ended deliveries by when they
// ended, outbox rows once relayed, past the retention and without a delivery left; a row still
// to relay or with a delivery in progress stays whatever its age. The mark is the highest id
// pruned, and the metric counts what went.
func TestRetention_PrunesWhatEndedPastTheRetentionOnly(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const keep = 24 * time.Hour
	old, recent := 2*keep, keep/2
	rows := []historyRow{
		{name: "old, relayed, no endpoint", age: old, relayed: true},
		{name: "old, relayed, delivered", age: old, relayed: true, delivery: "DELIVERED"},
		{name: "old, relayed, dead", age: old, relayed: true, delivery: "DEAD"},
		{name: "old, not relayed yet", age: old, outboxStays: true},
		{name: "old, delivery waiting", age: old, relayed: true, delivery: "WAITING", outboxStays: true, deliveryStays: true},
		{name: "old, delivery queued", age: old, relayed: true, delivery: "QUEUED", outboxStays: true, deliveryStays: true},
		{name: "old, dead then retried", age: old, relayed: true, delivery: "QUEUED", outboxStays: true, deliveryStays: true},
		{name: "recent, relayed, delivered", age: recent, relayed: true, delivery: "DELIVERED", outboxStays: true, deliveryStays: true},
		{name: "recent, relayed, no endpoint", age: recent, relayed: true, outboxStays: true},
	}
	var endpoint int64
	if err := pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (url, events, secret, created_by)
		VALUES ('https://example.com/hook', '{media.ready}', '\x00', 1) RETURNING id`).Scan(&endpoint); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		err := pool.QueryRow(ctx, `INSERT INTO notification_outbox (member_id, media_id, kind, created_at, relayed_at)
			VALUES (1, $1, 'ready', statement_timestamp() - $2::interval, CASE WHEN $3 THEN statement_timestamp() END) RETURNING id`,
			100+i, r.age, r.relayed).Scan(&ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if r.delivery == "" {
			continue
		}
		// A QUEUED or WAITING delivery has not ended (finished_at NULL); a revived one has had
		// its finished_at cleared as the Revive hook does.
		if _, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, status, job_id, event_at, created_at, finished_at)
			VALUES ($1, $2, $3, $4, CASE WHEN $4 <> 'WAITING' THEN 1 END, statement_timestamp() - $5::interval, statement_timestamp() - $5::interval,
			        CASE WHEN $4 IN ('DELIVERED', 'DEAD') THEN statement_timestamp() - $5::interval END)`,
			endpoint, ids[i], 100+i, r.delivery, r.age); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	// A batch of 2 makes the prune take several batches.
	retention, err := webhooks.NewRetention(pool, webhooks.RetentionConfig{KeepFor: keep, Batch: 2, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	deliveries, events, err := retention.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wantDeliveries, wantEvents int64
	var highest int64
	for i, r := range rows {
		outbox := exists(t, pool, `SELECT EXISTS (SELECT 1 FROM notification_outbox WHERE id = $1)`, ids[i])
		if outbox != r.outboxStays {
			t.Errorf("%s: outbox row kept %v, want %v", r.name, outbox, r.outboxStays)
		}
		if !r.outboxStays {
			wantEvents++
			highest = max(highest, ids[i])
		}
		if r.delivery == "" {
			continue
		}
		delivery := exists(t, pool, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE outbox_id = $1)`, ids[i])
		if delivery != r.deliveryStays {
			t.Errorf("%s: delivery kept %v, want %v", r.name, delivery, r.deliveryStays)
		}
		if !r.deliveryStays {
			wantDeliveries++
		}
	}
	if deliveries != wantDeliveries || events != wantEvents {
		t.Errorf("Prune = %d deliveries, %d events; want %d, %d", deliveries, events, wantDeliveries, wantEvents)
	}
	var mark int64
	if err := pool.QueryRow(ctx, `SELECT pruned_through FROM outbox_retention WHERE member_id = 1`).Scan(&mark); err != nil || mark != highest {
		t.Errorf("pruned_through = %d (%v), want the highest id pruned, %d", mark, err, highest)
	}
	for table, want := range map[string]int64{"deliveries": wantDeliveries, "outbox": wantEvents} {
		if got := pruned(t, reg, table); got != float64(want) {
			t.Errorf("playhead_outbox_pruned_total{table=%q} = %v, want %d", table, got, want)
		}
	}
	// A second prune finds nothing, and the mark stays.
	if d, e, err := retention.Prune(ctx); err != nil || d+e != 0 {
		t.Errorf("second Prune = %d, %d, %v; want nothing", d, e, err)
	}
	if err := pool.QueryRow(ctx, `SELECT pruned_through FROM outbox_retention WHERE member_id = 1`).Scan(&mark); err != nil || mark != highest {
		t.Errorf("pruned_through after a prune of nothing = %d (%v), want %d", mark, err, highest)
	}
}

func exists(t *testing.T, pool *pgxpool.Pool, sql string, id int64) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), sql, id).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// pruned reads playhead_outbox_pruned_total{table} from reg.
func pruned(t *testing.T, reg *prometheus.Registry, table string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == "playhead_outbox_pruned_total" && m.GetLabel()[0].GetValue() == table {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no playhead_outbox_pruned_total{table=%q}", table)
	return 0
}

// With 1 000 000 outbox rows past the retention (and as many ended
// deliveries), one batch of either prune reads about a batch of rows, from EXPLAIN ANALYZE,
// never the backlog: no sequential scan, a partial index in the order the rows go.
func TestRetentionSQL_OneBatchReadsABatch(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	const backlog, batch = 1_000_000, 1000
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO webhook_endpoints (url, events, secret, created_by) VALUES ('https://example.com/hook', '{media.ready}', '\x00', 1);
		INSERT INTO notification_outbox (member_id, media_id, kind, created_at, relayed_at)
		SELECT g %% 1000, g, 'ready', statement_timestamp() - interval '30 days' + g * interval '1 second', statement_timestamp()
		FROM generate_series(1, %d) g;
		INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, status, job_id, event_at, finished_at)
		SELECT 1, id, media_id, 'DELIVERED', 1, created_at, created_at FROM notification_outbox;
		ANALYZE notification_outbox; ANALYZE webhook_deliveries`, backlog)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ table, sql string }{
		{"webhook_deliveries", webhooks.PruneDeliveriesSQL},
		{"notification_outbox", webhooks.PruneOutboxSQL},
	} {
		if c.table == "notification_outbox" {
			// A prune removes the ended deliveries first; here in one statement, so that the
			// outbox batch finds rows without deliveries.
			if _, err := pool.Exec(ctx, `DELETE FROM webhook_deliveries; ANALYZE webhook_deliveries`); err != nil {
				t.Fatal(err)
			}
		}
		plan := plantest.Analyze(t, pool, c.sql, 7*24*time.Hour, batch)
		read, seq := plan.RowsReadFrom(c.table), slices.Contains(plan.SeqScans(), c.table)
		t.Logf("one %s prune batch of %d read %.0f rows of %s with %d rows past retention; sequential scan of it: %v", c.table, batch, read, c.table, backlog, seq)
		if read > 3*batch || seq {
			out, _ := json.MarshalIndent(plan, "", " ")
			t.Errorf("one batch of %d read %.0f rows of %s (sequential scan: %v) with %d rows past retention, want about a batch; plan:\n%s",
				batch, read, c.table, seq, backlog, out)
		}
	}
}

// A delivery's end is what its retention counts from: the queue's Fail hook (DEAD; DELIVERED
// goes through the same statement) sets finished_at, and an admin retry (Revive) clears it, so
// a delivery retried after the retention is not pruned while it runs again.
func TestDelivery_FinishedAtFollowsItsEnd(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	delivery := oneDelivery(t, pool, "QUEUED", 0)
	kind := webhooks.JobKind(3)
	job := jobqueue.Job{Kind: webhooks.KindDeliver, Subject: delivery}
	state := func() (status string, finished bool) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT status, finished_at IS NOT NULL FROM webhook_deliveries WHERE id = $1`, delivery).Scan(&status, &finished); err != nil {
			t.Fatal(err)
		}
		return status, finished
	}
	for _, step := range []struct {
		name         string
		hook         func(pgx.Tx) error
		status       string
		wantFinished bool
	}{
		{"Fail", func(tx pgx.Tx) error { return kind.Fail(ctx, tx, job, errors.New("HTTP 503")) }, "DEAD", true},
		{"Revive", func(tx pgx.Tx) error { return kind.Revive(ctx, tx, job) }, "QUEUED", false},
	} {
		if err := pgx.BeginFunc(ctx, pool, step.hook); err != nil {
			t.Fatal(err)
		}
		if status, finished := state(); status != step.status || finished != step.wantFinished {
			t.Errorf("after %s: status %s, finished_at set %v; want %s, %v", step.name, status, finished, step.status, step.wantFinished)
		}
	}
	// Once pruned, a retry of its DEAD job is refused (409), not a 202 that sends nothing.
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id = $1`, delivery); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return kind.Revive(ctx, tx, job) })
	if apperr.CodeOf(err) != apperr.Conflict {
		t.Errorf("Revive of a pruned delivery: %v, want a conflict", err)
	}
}

// A prune that finds an old DEAD delivery while an admin retry holds it waits for the retry,
// then sees the delivery QUEUED again and leaves it (and its outbox row): the batch's rows are
// locked and checked again, not deleted by the ids read before the retry committed.
func TestRetention_WaitsForARetryAndKeepsWhatItRevived(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	delivery := oneDelivery(t, pool, "DEAD", 8*24*time.Hour)
	retry, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = retry.Rollback(ctx) }()
	var retryPID int
	if err := retry.QueryRow(ctx, `SELECT pg_backend_pid() FROM webhook_deliveries WHERE id = $1 FOR UPDATE`, delivery).Scan(&retryPID); err != nil {
		t.Fatal(err)
	}
	retention, err := webhooks.NewRetention(pool, webhooks.RetentionConfig{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		deliveries, events int64
		err                error
	}
	pruned := make(chan result, 1)
	go func() {
		d, e, err := retention.Prune(ctx)
		pruned <- result{d, e, err}
	}()
	pgtest.WaitBlocked(t, pool, retryPID)
	if err := webhooks.JobKind(3).Revive(ctx, retry, jobqueue.Job{Kind: webhooks.KindDeliver, Subject: delivery}); err != nil {
		t.Fatal(err)
	}
	if err := retry.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-pruned; r.err != nil || r.deliveries != 0 || r.events != 0 {
		t.Fatalf("Prune = %d deliveries, %d events, %v; want nothing pruned (the delivery was revived)", r.deliveries, r.events, r.err)
	}
	var status string
	if err := pool.QueryRow(ctx, `SELECT status FROM webhook_deliveries WHERE id = $1`, delivery).Scan(&status); err != nil || status != "QUEUED" {
		t.Fatalf("the revived delivery: %q, %v; want it QUEUED, not pruned", status, err)
	}
}

// oneDelivery writes an endpoint, a relayed outbox row a day older than endedAgo, and its one
// delivery in status, which ended endedAgo ago if status is DELIVERED or DEAD; it returns the
// delivery's id.
func oneDelivery(t *testing.T, pool *pgxpool.Pool, status string, endedAgo time.Duration) int64 {
	t.Helper()
	var delivery int64
	if err := pool.QueryRow(context.Background(), `
		WITH e AS (INSERT INTO webhook_endpoints (url, events, secret, created_by) VALUES ('https://example.com/hook', '{media.ready}', '\x00', 1) RETURNING id),
		o AS (INSERT INTO notification_outbox (member_id, media_id, kind, created_at, relayed_at)
		      VALUES (1, 7, 'ready', statement_timestamp() - $2::interval - interval '1 day', statement_timestamp()) RETURNING id)
		INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, status, job_id, event_at, finished_at)
		SELECT e.id, o.id, 7, $1, 1, statement_timestamp(),
		       CASE WHEN $1 IN ('DELIVERED', 'DEAD') THEN statement_timestamp() - $2::interval END
		FROM e, o RETURNING id`, status, endedAgo).Scan(&delivery); err != nil {
		t.Fatal(err)
	}
	return delivery
}
