// Package notify carries PostgreSQL LISTEN/NOTIFY between nodes: the channel names, a helper
// to send inside a transaction, and one listening connection per process that dispatches to
// handlers and reconnects by itself.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// ChannelMediaChanged carries a media id whenever a media row changes; every node's media
// cache evicts that id.
const ChannelMediaChanged = "media_changed"

// ChannelJobs carries a job kind whenever a job becomes claimable; idle workers wake at once
// instead of waiting for their next poll.
const ChannelJobs = "jobs_available"

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
// Register handlers with Handle before Run.
type Listener struct {
	inner pgxlisten.Listener
}

// NewListener returns a Listener that connects with connString.
func NewListener(connString string, logger *slog.Logger) *Listener {
	l := &Listener{}
	l.inner.Connect = func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, connString) }
	l.inner.LogError = func(ctx context.Context, err error) {
		if ctx.Err() == nil { // a cancelled Run is a normal stop, not a failure
			logger.Warn("notification listener", "err", err)
		}
	}
	l.inner.ReconnectDelay = time.Second
	return l
}

// Handle calls onPayload for each notification on channel, and onConnect every time the
// listening connection is (re)established, before any notification: notifications sent while
// the connection was down are lost, so onConnect must resynchronise (a cache clears itself).
// onConnect may be nil.
func (l *Listener) Handle(channel string, onPayload func(payload string), onConnect func()) {
	l.inner.Handle(channel, handler{onPayload: onPayload, onConnect: onConnect})
}

// Run listens until ctx is done, reconnecting after failures.
func (l *Listener) Run(ctx context.Context) error {
	return l.inner.Listen(ctx)
}

type handler struct {
	onPayload func(string)
	onConnect func()
}

func (h handler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	h.onPayload(n.Payload)
	return nil
}

func (h handler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	if h.onConnect != nil {
		h.onConnect()
	}
	return nil
}

// The outbox kinds: what a member is told about their media.
const (
	OutboxMediaReady  = "media_ready"
	OutboxMediaFailed = "media_failed"
)

// Outbox records a notification for member about media in the caller's transaction, so it is
// sent exactly when the change it announces commits. A relay (outside this service) delivers
// the rows.
func Outbox(ctx context.Context, db Execer, member, media int64, kind string, payload map[string]any) error {
	if payload == nil {
		payload = map[string]any{}
	}
	_, err := db.Exec(ctx, `INSERT INTO notification_outbox (member_id, media_id, kind, payload) VALUES ($1, $2, $3, $4)`,
		member, media, kind, payload)
	if err != nil {
		return fmt.Errorf("outbox %s: %w", kind, err)
	}
	return nil
}
