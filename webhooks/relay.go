package webhooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/media"
)

// relayLockKey is the advisory lock that lets one node at a time relay the outbox.
const relayLockKey = 0x706c6179_686f6f6b // "playhook"

// RelayConfig configures a Relay. Zero values take the defaults named on each field.
type RelayConfig struct {
	// Interval is the fallback poll when no notification arrives. Default 1 s.
	Interval time.Duration
	// Batch is how many outbox rows one transaction relays. Default 100.
	Batch int
	// MaxAttempts is each delivery job's number of attempts before it is DEAD. Default 12.
	MaxAttempts int
	// Logger receives relay errors. Default slog.Default().
	Logger *slog.Logger
}

// Relay turns outbox rows into deliveries, one per matching endpoint, and enqueues the head of
// each (endpoint, media) chain as a job.
type Relay struct {
	pool    *pgxpool.Pool
	cfg     RelayConfig
	batches lifecycle.Batches
}

// NewRelay returns a Relay on pool. It does nothing until Start.
func NewRelay(pool *pgxpool.Pool, cfg RelayConfig) *Relay {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 12)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{pool: pool, cfg: cfg}
}

// Wake makes the relay run now. The listener calls it for every outbox notification.
func (r *Relay) Wake() { r.batches.Wake() }

// Start launches the relay loop: batch after batch while there is a backlog, then at each
// Wake or Interval.
func (r *Relay) Start(ctx context.Context) error {
	return r.batches.Start(ctx, r.cfg.Interval, r.cfg.Batch, r.RelayOnce,
		func(err error) { r.cfg.Logger.Warn("webhook relay failed", "err", err) }, nil)
}

// Stop ends the relay loop; a relay transaction in flight rolls back (its rows are relayed by
// the next run, here or on another node).
func (r *Relay) Stop(ctx context.Context) error { return r.batches.Stop(ctx) }

// chain is the deliveries of one media item to one endpoint.
type chain struct{ endpoint, media int64 }

// RelayOnce relays up to Batch outbox rows in one transaction and returns how many. It does
// nothing (0) while another node holds the relay lock.
//
// Everything happens in that transaction: marking the rows relayed, inserting their deliveries,
// enqueueing the chains' heads. A node that dies in the middle rolls it all back; the rows are
// relayed again, once, by whoever runs next. An endpoint gets the events that happened after
// its registration.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	relayed := 0
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(relayLockKey)).Scan(&locked); err != nil || !locked {
			return err
		}
		var ids []int64
		rows, err := tx.Query(ctx, `
			UPDATE notification_outbox SET relayed_at = statement_timestamp()
			WHERE id = ANY(ARRAY(SELECT id FROM notification_outbox WHERE relayed_at IS NULL ORDER BY id LIMIT $1))
			RETURNING id`, r.cfg.Batch)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(ids) == 0 {
			return err
		}
		relayed = len(ids)
		kinds, types := media.OutboxKinds()
		rows, err = tx.Query(ctx, `
			INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, event_at)
			SELECT e.id, o.id, o.media_id, o.created_at
			FROM notification_outbox o
			JOIN unnest($2::text[], $3::text[]) AS m(kind, type) ON m.kind = o.kind
			JOIN webhook_endpoints e ON m.type = ANY(e.events) AND e.created_at <= o.created_at
			WHERE o.id = ANY($1)
			ORDER BY o.id, e.id
			ON CONFLICT (outbox_id, endpoint_id) DO NOTHING
			RETURNING endpoint_id, media_id`, ids, kinds, types)
		if err != nil {
			return err
		}
		chains, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (chain, error) {
			var c chain
			return c, row.Scan(&c.endpoint, &c.media)
		})
		if err != nil {
			return err
		}
		// In one order, so that two transactions taking several chain locks cannot deadlock.
		slices.SortFunc(chains, func(a, b chain) int {
			return cmp.Or(cmp.Compare(a.endpoint, b.endpoint), cmp.Compare(a.media, b.media))
		})
		for _, c := range slices.Compact(chains) {
			if err := lockChain(ctx, tx, c); err != nil {
				return err
			}
			if err := advance(ctx, tx, c, r.cfg.MaxAttempts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("relay the outbox: %w", err)
	}
	return relayed, nil
}

// lockChain takes c's transaction advisory lock. Every change of which delivery of a chain has
// a job (the relay adding deliveries, a delivery's job ending, an admin retry) holds it, so
// that no two see the chain's head differently: without it, a relay could add a delivery
// behind a head whose job is finishing, each seeing the other's change uncommitted, and the
// new delivery would wait for ever.
func lockChain(ctx context.Context, tx pgx.Tx, c chain) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(format('webhook chain %s %s', $1::bigint, $2::bigint), 0))`,
		c.endpoint, c.media); err != nil {
		return fmt.Errorf("lock webhook chain %d/%d: %w", c.endpoint, c.media, err)
	}
	return nil
}

// LockMediaChains takes, in tx, the lock of every chain of media's events that has a
// delivery waiting or queued, in the relay's order, and holds them until tx ends. A writer
// that removes waiting deliveries of the media (its deletion) takes them first: otherwise a
// delivery's job ending meanwhile sees a removed delivery, still uncommitted, as its chain's
// next head and gives it the job, and the deliveries behind it (media.deleted) wait for ever.
func LockMediaChains(ctx context.Context, tx pgx.Tx, media int64) error {
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT endpoint_id FROM webhook_deliveries
		WHERE outbox_id = ANY (ARRAY(SELECT id FROM notification_outbox WHERE media_id = $1)) AND status IN ('WAITING', 'QUEUED')
		ORDER BY endpoint_id`, media)
	if err != nil {
		return fmt.Errorf("webhook chains of media %d: %w", media, err)
	}
	endpoints, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("webhook chains of media %d: %w", media, err)
	}
	for _, e := range endpoints {
		if err := lockChain(ctx, tx, chain{endpoint: e, media: media}); err != nil {
			return err
		}
	}
	return nil
}

// advance enqueues the job of c's oldest unfinished delivery if it is WAITING: the head gets
// its job only when nothing older of the chain is queued. The caller holds c's lock.
func advance(ctx context.Context, tx pgx.Tx, c chain, maxAttempts int) error {
	var head int64
	var status string
	err := tx.QueryRow(ctx, `
		SELECT id, status FROM webhook_deliveries
		WHERE endpoint_id = $1 AND media_id = $2 AND status IN ('WAITING', 'QUEUED')
		ORDER BY outbox_id LIMIT 1`, c.endpoint, c.media).Scan(&head, &status)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && status != "WAITING"):
		return nil
	case err != nil:
		return fmt.Errorf("find the head of webhook chain %d/%d: %w", c.endpoint, c.media, err)
	}
	job, err := jobqueue.Enqueue(ctx, tx, KindDeliver, head, maxAttempts)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'QUEUED', job_id = $2 WHERE id = $1`, head, job); err != nil {
		return fmt.Errorf("queue webhook delivery %d: %w", head, err)
	}
	return nil
}
