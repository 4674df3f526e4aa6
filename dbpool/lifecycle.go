package dbpool

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WaitReachable pings pool until it answers, for up to 30 s: a node started together with its
// database should wait for it rather than crash-loop. name is the variable the pool was opened
// with, which the error and the log lines name.
func WaitReachable(ctx context.Context, pool *pgxpool.Pool, name string, logger *slog.Logger) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := pool.Ping(pingCtx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: database unreachable: %w", name, err)
		}
		logger.Warn("waiting for database", "variable", name, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// CloseBy closes pool, waiting for its connections at most until deadline (none when zero):
// pgx takes up to 15 s to close a connection whose query was cancelled on a database that does
// not answer, which a stopping node, whose accepted work is written or spilled by then, need
// not wait for.
func CloseBy(pool *pgxpool.Pool, deadline time.Time, logger *slog.Logger) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		pool.Close()
	}()
	if deadline.IsZero() {
		<-closed
		return
	}
	select {
	case <-closed:
	case <-time.After(time.Until(deadline)):
		logger.Warn("database connections still closing at the stop deadline; exiting without waiting for them")
	}
}
