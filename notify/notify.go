// Package notify carries PostgreSQL LISTEN/NOTIFY between nodes: a helper to send inside a
// transaction, and one listening connection per process that dispatches to handlers and
// reconnects by itself. The channels belong to the packages that send on them
// (media.ChannelChanged, jobqueue.Channel).
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/playhead/playhead/lifecycle"
)

// Execer is what Send needs: a transaction, a connection or a pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Send queues a notification. Inside a transaction it is delivered only if the transaction
// commits, which is why writers send it in the same transaction as their change.
func Send(ctx context.Context, db Execer, channel, payload string) error {
	if _, err := db.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listener holds one dedicated connection that LISTENs on every channel with a handler.
// Register handlers with Handle before Start.
type Listener struct {
	inner    pgxlisten.Listener
	handlers map[string]handlers
	loop     lifecycle.Loop
}

// NewListener returns a Listener that connects with connString.
func NewListener(connString string, logger *slog.Logger) *Listener {
	l := &Listener{handlers: make(map[string]handlers)}
	l.inner.Connect = func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, connString) }
	l.inner.LogError = func(ctx context.Context, err error) {
		if ctx.Err() == nil { // a cancelled Run is a normal stop, not a failure
			logger.Warn("notification listener", "err", err)
		}
	}
	l.inner.ReconnectDelay = time.Second
	return l
}

// Handle, called before Start, makes the listener call onPayload for each notification on
// channel, and onConnect every time the listening connection is (re)established, before any
// notification: notifications sent while the connection was down are lost, so onConnect must
// resynchronise (a cache clears itself). onConnect may be nil. A channel may have several
// handlers (the webhook relay and the event streams both follow the outbox); each is called in
// the order it was added.
func (l *Listener) Handle(channel string, onPayload func(payload string), onConnect func()) {
	l.handlers[channel] = append(l.handlers[channel], handler{onPayload: onPayload, onConnect: onConnect})
}

// Start connects in the background and listens until Stop, reconnecting after failures.
func (l *Listener) Start(ctx context.Context) error {
	for channel, hs := range l.handlers {
		l.inner.Handle(channel, hs)
	}
	return l.loop.Start(ctx, func(ctx context.Context) { _ = l.inner.Listen(ctx) }) // returns only when stopped
}

// Stop closes the listening connection and waits for it.
func (l *Listener) Stop(ctx context.Context) error { return l.loop.Stop(ctx) }

type handler struct {
	onPayload func(string)
	onConnect func()
}

// handlers are one channel's handlers, called in turn.
type handlers []handler

func (hs handlers) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	for _, h := range hs {
		h.onPayload(n.Payload)
	}
	return nil
}

func (hs handlers) HandleBacklog(context.Context, string, *pgx.Conn) error {
	for _, h := range hs {
		if h.onConnect != nil {
			h.onConnect()
		}
	}
	return nil
}
