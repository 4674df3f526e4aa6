package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/dbpool"
)

// Two connection strings (docs/operations/clusters.md, "Behind PgBouncer"). DATABASE_URL carries
// every statement that lives within one transaction: the requests, the playback flushes, the job
// queue's claims, heartbeats and fenced finishes, the transaction advisory locks of the pruner and
// the webhook relay (pg_try_advisory_xact_lock), pg_notify, and the claim's
// set_config('synchronous_commit', 'off', true), local to its implicit transaction. It may point at
// a pooler in transaction mode. PLAYHEAD_DATABASE_DIRECT_URL carries what needs a session of its
// own: LISTEN (notify.Listener), the orphan sweep's pg_try_advisory_lock held across its pass,
// goose's session lock around the migrations, and the progress reads' plan_cache_mode.

// sessionPoolConns is the size of the direct pool when it is not the request pool: goose holds
// one connection for its lock and migrates on another; the orphan sweep holds one for its lock.
const sessionPoolConns = 2

// poolOptions configures the pools that connect with DATABASE_URL.
func poolOptions(cfg Config) []dbpool.Option {
	if cfg.DBPooler == poolerTransaction {
		return []dbpool.Option{dbpool.ThroughTransactionPooler()}
	}
	return nil
}

// openSessionPool returns the pool for session-bound statements: the request pool itself when
// DATABASE_URL is direct, or a small pool of its own on PLAYHEAD_DATABASE_DIRECT_URL, closed
// with the node.
func (n *node) openSessionPool(ctx context.Context) (*pgxpool.Pool, error) {
	if n.cfg.DatabaseDirectURL == n.cfg.DatabaseURL {
		return n.pool, nil
	}
	pool, err := dbpool.Open(ctx, n.cfg.DatabaseDirectURL, sessionPoolConns, nil)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.closePool(pool) })
	return pool, nil
}
