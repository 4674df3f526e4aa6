package xapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/media"
)

// relayLockKey is the advisory lock that lets one node at a time relay completions.
const relayLockKey = 0x706c6179_78617069 // "playxapi"

// RelayConfig configures a Relay. Zero values take the defaults named on each field.
type RelayConfig struct {
	// Activities makes the statements' IRIs. Required.
	Activities Activities
	// Completion is the completion rule (PLAYHEAD_COMPLETION_*), for the statements'
	// completion threshold. Required.
	Completion media.Completion
	// Interval is the fallback poll when no notification arrives. Default 1 s.
	Interval time.Duration
	// Batch is how many outbox rows one transaction relays. Default 100.
	Batch int
	// MaxAttempts is each statement job's number of attempts before it is DEAD. Default 12.
	MaxAttempts int
	// KeepDead is how long a DEAD statement is kept for an admin retry
	// (PLAYHEAD_OUTBOX_RETENTION). Default 7 days.
	KeepDead time.Duration
	// Logger receives relay errors. Default slog.Default().
	Logger *slog.Logger
}

// Relay turns the completions of the outbox into statements, each with its job.
type Relay struct {
	pool    *pgxpool.Pool
	cfg     RelayConfig
	batches lifecycle.Batches
	// pruned is when the loop last pruned DEAD statements; only the loop's goroutine reads and
	// writes it.
	pruned time.Time
}

// NewRelay returns a Relay on pool. It does nothing until Start.
func NewRelay(pool *pgxpool.Pool, cfg RelayConfig) *Relay {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 100)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 12)
	cfg.KeepDead = cmp.Or(cfg.KeepDead, 7*24*time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{pool: pool, cfg: cfg}
}

// Wake makes the relay run now. The listener calls it for every outbox notification.
func (r *Relay) Wake() { r.batches.Wake() }

// Start launches the relay loop: batch after batch while there is a backlog, then at each
// Wake or Interval, pruning DEAD statements every pruneEvery.
func (r *Relay) Start(ctx context.Context) error {
	return r.batches.Start(ctx, r.cfg.Interval, r.cfg.Batch, r.RelayOnce,
		func(err error) { r.cfg.Logger.Warn("xAPI relay failed", "err", err) }, r.pruneDue)
}

// Stop ends the relay loop; a relay transaction in flight rolls back (its rows are relayed by
// the next run, here or on another node).
func (r *Relay) Stop(ctx context.Context) error { return r.batches.Stop(ctx) }

// pruneEvery is how often the loop prunes DEAD statements past KeepDead.
const pruneEvery = 10 * time.Minute

// pruneDue prunes DEAD statements when pruneEvery has passed since the last time.
func (r *Relay) pruneDue(ctx context.Context) {
	if time.Since(r.pruned) < pruneEvery {
		return
	}
	if _, err := r.PruneDead(ctx); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("xAPI statement retention failed", "err", err)
	}
	r.pruned = time.Now()
}

// RelayOnce relays up to Batch completion rows of the outbox in one transaction and returns
// how many. It does nothing (0) while another node holds the relay lock.
//
// Everything happens in that transaction: marking the rows relayed, building and storing their
// statements, enqueueing their jobs. A node that dies in the middle rolls it all back; the rows
// are relayed again, once, by whoever runs next. The statements are written behind the erasure
// fence: a member erased meanwhile gets none.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	relayed := 0
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(relayLockKey)).Scan(&locked); err != nil || !locked {
			return err
		}
		if _, err := tx.Exec(ctx, erasure.FenceSQL); err != nil {
			return err
		}
		// The kinds are written out, as in the partial index (migration 00033), so that the
		// planner matches its predicate: media.OutboxPlaybackCompleted and
		// media.OutboxCollectionCompleted.
		rows, err := tx.Query(ctx, `
			UPDATE notification_outbox SET xapi_relayed_at = statement_timestamp()
			WHERE id = ANY(ARRAY(
			    SELECT id FROM notification_outbox
			    WHERE xapi_relayed_at IS NULL AND kind IN ('playback_completed', 'collection_completed')
			    ORDER BY id LIMIT $1))
			RETURNING id, kind, media_id, member_id, created_at, payload`, r.cfg.Batch)
		if err != nil {
			return err
		}
		events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (media.OutboxRow, error) {
			var o media.OutboxRow
			return o, row.Scan(&o.ID, &o.Kind, &o.MediaID, &o.MemberID, &o.CreatedAt, &o.Payload)
		})
		if err != nil {
			return err
		}
		relayed = len(events)
		for _, e := range events {
			s, err := r.statement(ctx, tx, e)
			if err != nil {
				return err
			}
			if err := r.store(ctx, tx, e, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("relay completions to xAPI: %w", err)
	}
	return relayed, nil
}

// statement builds the statement of completion row e. A playback completion reads the media's
// title and the member's watched ranges as they are now, a moment after the finish.
func (r *Relay) statement(ctx context.Context, tx pgx.Tx, e media.OutboxRow) (Statement, error) {
	a := r.cfg.Activities
	if e.Kind == media.OutboxCollectionCompleted {
		c := e.CollectionCompleted()
		return a.CourseStatement(CourseCompletion{EventID: e.ID, MemberID: e.MemberID, Collection: c.CollectionID, CompletedAt: c.CompletedAt}), nil
	}
	p := e.PlaybackCompleted()
	c := VideoCompletion{EventID: e.ID, MemberID: e.MemberID, MediaID: e.MediaID, FinishedAt: p.FinishedAt,
		PositionMS: p.PositionMS, DurationMS: p.DurationMS, Collections: p.Collections}
	var duration, credits pgtype.Int8
	err := tx.QueryRow(ctx, `
		SELECT m.title, m.duration_ms, m.credits_start_ms, (SELECT watched FROM playback WHERE member_id = $1 AND media_id = $2)
		FROM media m WHERE m.id = $2`, e.MemberID, e.MediaID).Scan(&c.Title, &duration, &credits, &c.Watched)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The media is gone: the statement says what the event says.
	case err != nil:
		return Statement{}, fmt.Errorf("read media %d for its completion %d: %w", e.MediaID, e.ID, err)
	case c.DurationMS == 0 && duration.Valid:
		c.DurationMS = duration.Int64
	}
	if point, ok := r.cfg.Completion.Point(c.DurationMS); ok {
		c.PointMS = int64(point)
		if credits.Valid && credits.Int64 < c.PointMS {
			c.PointMS = credits.Int64
		}
	}
	return a.VideoStatement(c), nil
}

// store writes s as the statement of e, unless its member is erased, and enqueues its job.
func (r *Relay) store(ctx context.Context, tx pgx.Tx, e media.OutboxRow, s Statement) error {
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var id int64
	err = tx.QueryRow(ctx, `
		INSERT INTO xapi_statements (outbox_id, member_id, statement_id, body)
		SELECT $1, $2, $3, $4 WHERE `+erasure.AntiJoin("$2")+`
		ON CONFLICT (outbox_id) DO NOTHING
		RETURNING id`, e.ID, e.MemberID, s.ID, body).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the member is erased (the anti-join), or e has its statement already
	}
	if err != nil {
		return fmt.Errorf("store the statement of completion %d: %w", e.ID, err)
	}
	_, err = jobqueue.Enqueue(ctx, tx, KindSend, id, r.cfg.MaxAttempts)
	return err
}

// PruneDead deletes the DEAD statements older than KeepDead, at most 1000, and returns how
// many.
func (r *Relay) PruneDead(ctx context.Context) (int64, error) {
	tag, err := r.pool.Exec(ctx, `
		DELETE FROM xapi_statements WHERE id = ANY(ARRAY(
		    SELECT id FROM xapi_statements WHERE dead_at < statement_timestamp() - $1::interval
		    ORDER BY dead_at LIMIT 1000))`, r.cfg.KeepDead)
	if err != nil {
		return 0, fmt.Errorf("prune DEAD xAPI statements: %w", err)
	}
	return tag.RowsAffected(), nil
}
