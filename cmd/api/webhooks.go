package main

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/webhooks"
)

// newWebhookSender returns the sender of webhook deliveries, with its metrics registered.
func newWebhookSender(cfg Config, pool *pgxpool.Pool, reg prometheus.Registerer) *webhooks.Sender {
	return webhooks.NewSender(webhooks.SenderConfig{
		Pool:         pool,
		AllowPrivate: cfg.WebhookAllowPrivate,
		Timeout:      cfg.WebhookTimeout,
		MaxAttempts:  cfg.WebhookMaxAttempts,
		Metrics:      webhooks.NewMetrics(reg, pool),
	})
}

// addWebhookRelay lists the outbox relay, woken by every outbox row's notification (and by
// every reconnect of the listener, since notifications may have been missed meanwhile).
func (n *node) addWebhookRelay(listener *notify.Listener) {
	relay := webhooks.NewRelay(n.pool, webhooks.RelayConfig{
		Interval:    n.cfg.JobPollInterval,
		MaxAttempts: n.cfg.WebhookMaxAttempts,
		Logger:      n.logger,
	})
	n.add("webhook relay", relay)
	listener.Handle(media.ChannelOutbox, func(string) { relay.Wake() }, relay.Wake)
}
