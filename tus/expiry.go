package tus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/storage"
)

// ExpirerConfig configures an Expirer. Zero values take the defaults named on each field.
type ExpirerConfig struct {
	Pool    *pgxpool.Pool
	Objects Objects
	// Interval is the time between passes. Default 1 min.
	Interval time.Duration
	// Batch bounds the uploads one pass removes. Default 100.
	Batch   int
	Metrics *Metrics
	Logger  *slog.Logger
}

// Expirer removes expired uploads: unfinished ones nothing was stored to for
// PLAYHEAD_UPLOAD_EXPIRY, with their parts and tail, and the rows of finished ones (their media
// keeps the source). It runs on every node with workers; two nodes never remove one upload
// twice (FOR UPDATE SKIP LOCKED), and one being written to is left alone: its request holds
// its advisory lock, which the pass tries in its transaction.
type Expirer struct {
	cfg  ExpirerConfig
	loop lifecycle.Loop
}

// NewExpirer returns an Expirer that does nothing until Start.
func NewExpirer(cfg ExpirerConfig) (*Expirer, error) {
	cfg.Interval, cfg.Batch = cmp.Or(cfg.Interval, time.Minute), cmp.Or(cfg.Batch, 100)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pool == nil || cfg.Objects == nil || cfg.Metrics == nil {
		return nil, errors.New("tus: ExpirerConfig needs Pool, Objects and Metrics")
	}
	return &Expirer{cfg: cfg}, nil
}

// Start launches the passes, the first one Interval from now.
func (e *Expirer) Start(ctx context.Context) error { return e.loop.Every(ctx, e.cfg.Interval, e.tick) }

// Stop cancels a pass in progress and waits for it, at most until ctx ends.
func (e *Expirer) Stop(ctx context.Context) error { return e.loop.Stop(ctx) }

func (e *Expirer) tick(ctx context.Context) {
	if n, err := e.Expire(ctx); err != nil && ctx.Err() == nil {
		e.cfg.Logger.Warn("upload expiry failed; the next pass tries again", "err", err)
	} else if n > 0 {
		e.cfg.Logger.Info("expired uploads removed", "uploads", n)
	}
}

// expired is an expired upload's row, as a pass removes it.
type expired struct {
	id, partsID string
	finished    bool
}

// Expire runs one pass and returns how many uploads it removed. The rows go first, in one
// transaction, with their tails' pieces (ON DELETE CASCADE); then the bytes of the unfinished
// ones in the object store (parts and piece objects), and what is left beside a finished
// one's source (piece objects under its tails, parts stored after its finish). Bytes of an unfinished upload a pass could not remove (the node
// stopped between the two) are nobody's any more, and the orphan sweep removes them
// (OrphanRule).
func (e *Expirer) Expire(ctx context.Context) (int, error) {
	var gone []expired
	err := pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id, parts_id, media_id IS NOT NULL FROM uploads
			WHERE expires_at <= statement_timestamp()
			  AND pg_try_advisory_xact_lock(hashtextextended('tus upload ' || id, 0))
			ORDER BY expires_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED`, e.cfg.Batch)
		if err != nil {
			return err
		}
		gone, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (expired, error) {
			var x expired
			err := row.Scan(&x.id, &x.partsID, &x.finished)
			return x, err
		})
		if err != nil || len(gone) == 0 {
			return err
		}
		ids := make([]string, len(gone))
		for i, x := range gone {
			ids[i] = x.id
		}
		_, err = tx.Exec(ctx, `DELETE FROM uploads WHERE id = ANY($1)`, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire uploads: %w", err)
	}
	for _, x := range gone {
		if x.finished {
			// The media keeps the source; what else is in its folder goes now, since once the
			// row is gone the source keeps the folder in use for the sweep: a tail piece
			// object whose removal failed, and a part that a writer which lost its lock stored
			// after the finish (on local storage, a parts folder beside the source; on S3 the
			// write is complete, and a part cannot be added to it).
			_ = e.cfg.Objects.DeletePrefix(ctx, tailsPrefix(x.id))
			_ = e.cfg.Objects.AbortParts(ctx, sourceKey(x.id), x.partsID)
			continue
		}
		e.cfg.Metrics.expired.Inc()
		_ = e.cfg.Objects.AbortParts(ctx, sourceKey(x.id), x.partsID)
		_ = e.cfg.Objects.DeletePrefix(ctx, "tus/"+x.id+"/")
	}
	return len(gone), nil
}

// OrphanRule is the orphan sweep's rule for the uploads' folder: tus/{upload}/ is in use while
// its upload's row exists (unfinished and not expired, or finished) or a media's source is
// there. What is left is the bytes of uploads removed by a process that stopped before it
// removed their bytes too, and of a write racing with the removal.
func OrphanRule(pool *pgxpool.Pool) storage.SweepRule {
	return storage.SweepRule{Prefix: "tus/", Depth: 1, InUse: func(ctx context.Context, groups []string) (map[string]bool, error) {
		ids := make([]string, len(groups))
		for i, g := range groups {
			ids[i] = strings.TrimSuffix(strings.TrimPrefix(g, "tus/"), "/")
		}
		rows, err := pool.Query(ctx, `
			SELECT 'tus/' || g.id || '/' FROM unnest($1::text[]) AS g(id)
			WHERE EXISTS (SELECT 1 FROM uploads u WHERE u.id = g.id AND (u.media_id IS NOT NULL OR u.expires_at > statement_timestamp()))
			   OR EXISTS (SELECT 1 FROM media m WHERE m.source_key = 'tus/' || g.id || '/source')`, ids)
		if err != nil {
			return nil, fmt.Errorf("uploads in use: %w", err)
		}
		used, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		out := make(map[string]bool, len(used))
		for _, g := range used {
			out[g] = true
		}
		return out, nil
	}}
}
