package webhooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/lifecycle"
)

// RetentionConfig configures a Retention. Zero values take the defaults named on each field.
type RetentionConfig struct {
	// KeepFor is how long outbox rows and ended deliveries are kept
	// (PLAYHEAD_OUTBOX_RETENTION). Default 7 days.
	KeepFor time.Duration
	// Interval is the time between prunes. Default 10 min.
	Interval time.Duration
	// Batch bounds the rows one transaction deletes. Default 1000.
	Batch   int
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Retention prunes the event history by age: webhook deliveries that ended (DELIVERED or DEAD)
// more than KeepFor ago, then the outbox rows older than KeepFor that are relayed and have no
// delivery left. A row still to relay, or with a delivery still WAITING or QUEUED, stays
// whatever its age. Each batch is its own short transaction under a transaction advisory lock
// (one node prunes at a time), like the job pruner's. The highest outbox id pruned is kept in
// outbox_retention, per member: the event stream tells a client of that member resuming from
// before it to resync.
type Retention struct {
	pool   *pgxpool.Pool
	cfg    RetentionConfig
	pruned *prometheus.CounterVec
	loop   lifecycle.Loop
}

// NewRetention returns a Retention on pool that does nothing until Start.
func NewRetention(pool *pgxpool.Pool, cfg RetentionConfig) (*Retention, error) {
	cfg.KeepFor = cmp.Or(cfg.KeepFor, 7*24*time.Hour)
	cfg.Interval = cmp.Or(cfg.Interval, 10*time.Minute)
	cfg.Batch = cmp.Or(cfg.Batch, 1000)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if pool == nil || cfg.Metrics == nil {
		return nil, errors.New("webhooks: NewRetention needs a pool and RetentionConfig.Metrics")
	}
	r := &Retention{pool: pool, cfg: cfg, pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "playhead", Subsystem: "outbox", Name: "pruned_total",
		Help: "Rows the event history's retention deleted (PLAYHEAD_OUTBOX_RETENTION), by table: outbox (notification_outbox) or deliveries (webhook_deliveries).",
	}, []string{"table"})}
	for _, t := range []string{tableDeliveries, tableOutbox} {
		r.pruned.WithLabelValues(t)
	}
	if err := cfg.Metrics.Register(r.pruned); err != nil {
		return nil, err
	}
	return r, nil
}

// The values of the pruned counter's table label.
const (
	tableDeliveries = "deliveries"
	tableOutbox     = "outbox"
)

// Start launches the prunes, the first one Interval from now.
func (r *Retention) Start(ctx context.Context) error {
	return r.loop.Every(ctx, r.cfg.Interval, r.tick)
}

// Stop ends the prunes and waits for the one in progress (its batch rolls back if cancelled).
func (r *Retention) Stop(ctx context.Context) error { return r.loop.Stop(ctx) }

func (r *Retention) tick(ctx context.Context) {
	deliveries, events, err := r.Prune(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.cfg.Logger.Warn("event history retention failed; the next prune tries again", "err", err)
	case deliveries+events > 0:
		r.cfg.Logger.Info("pruned the event history", "deliveries", deliveries, "events", events)
	}
}

// retentionLockKey is the advisory lock that lets one node at a time prune the event history.
const retentionLockKey = 0x706c6179_6f757472 // "playoutr"

// pruneDeliveriesSQL deletes one batch of deliveries that ended more than $1 ago. As in the
// job pruner, the batch is locked by the inner SELECT (a delivery an admin retry made QUEUED
// meanwhile fails its re-checked WHERE and stays) and deleted by its ids, one key probe each;
// the partial index holds only ended deliveries, in the order they go.
const pruneDeliveriesSQL = `
DELETE FROM webhook_deliveries
WHERE id = ANY(ARRAY(
    SELECT id FROM webhook_deliveries
    WHERE finished_at IS NOT NULL AND finished_at < statement_timestamp() - $1::interval
    ORDER BY finished_at LIMIT $2
    FOR UPDATE))`

// pruneOutboxSQL deletes one batch of relayed outbox rows older than $1 with no delivery left,
// and moves each member's mark in outbox_retention to the highest id of theirs it deleted. The
// relay only adds deliveries to rows it has not relayed yet, in the transaction that relays
// them, so a row found here gets none after the check.
const pruneOutboxSQL = `
WITH gone AS (
    DELETE FROM notification_outbox
    WHERE id = ANY(ARRAY(
        SELECT o.id FROM notification_outbox o
        WHERE o.relayed_at IS NOT NULL AND o.created_at < statement_timestamp() - $1::interval
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.outbox_id = o.id)
        ORDER BY o.created_at LIMIT $2
        FOR UPDATE OF o))
    RETURNING id, member_id
),
mark AS (
    INSERT INTO outbox_retention AS r (member_id, pruned_through)
    SELECT member_id, max(id) FROM gone GROUP BY member_id
    ON CONFLICT (member_id) DO UPDATE SET pruned_through = greatest(r.pruned_through, excluded.pruned_through)
)
SELECT count(*) FROM gone`

// Prune deletes the ended deliveries and then the outbox rows past the retention, in batches
// (dbpool.Batches: at most 1000 of each; the next prune continues), and returns how many of
// each it deleted.
func (r *Retention) Prune(ctx context.Context) (deliveries, events int64, err error) {
	deliveries, err = r.batches(ctx, tableDeliveries, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, pruneDeliveriesSQL, r.cfg.KeepFor, r.cfg.Batch)
		return tag.RowsAffected(), err
	})
	if err != nil {
		return deliveries, 0, err
	}
	events, err = r.batches(ctx, tableOutbox, func(tx pgx.Tx) (int64, error) {
		var n int64
		err := tx.QueryRow(ctx, pruneOutboxSQL, r.cfg.KeepFor, r.cfg.Batch).Scan(&n)
		return n, err
	})
	return deliveries, events, err
}

// batches runs batch through dbpool.Batches under the retention's lock and counts what it
// deleted.
func (r *Retention) batches(ctx context.Context, table string, batch func(pgx.Tx) (int64, error)) (int64, error) {
	deleted, err := dbpool.Batches(ctx, r.pool, retentionLockKey, r.cfg.Batch, 1000, batch)
	r.pruned.WithLabelValues(table).Add(float64(deleted))
	if err != nil {
		return deleted, fmt.Errorf("prune %s: %w", table, err)
	}
	return deleted, nil
}
