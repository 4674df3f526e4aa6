// Package webhooks delivers the notification outbox (media ready, media failed) to endpoints
// an administrator registered, as signed HTTP requests in the Standard Webhooks form.
//
// The relay (relay.go) turns each outbox row into one delivery per matching endpoint, in the
// transaction that marks the row relayed, under an advisory lock that lets one node relay at a
// time: a node that dies mid-relay rolls back and nothing is lost, and two nodes cannot relay
// one row twice (the unique (outbox_id, endpoint_id) is a second guard). Each delivery is a job
// of the queue core (kind KindDeliver): retries with backoff, DEAD after its attempts, visible
// in the admin job list, and picked up again after a kill -9 when its lease expires. A
// delivery's webhook-id is derived from its (event, endpoint), so every attempt carries the
// same one and receivers can deduplicate.
//
// Order per media item: the deliveries of one media item to one endpoint form a chain in
// outbox order, and only the oldest unfinished one has a job; the job's end (DELIVERED or
// DEAD) enqueues the next. So a receiver never gets a newer event for a media item before the
// older one was delivered or given up on.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// Endpoint is a registered receiver as the admin API shows it. Secret is set only in the
// answer to the registration.
type Endpoint struct {
	ID        int64     `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"secret,omitempty"`
	CreatedBy int64     `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// Delivery is one event's delivery to one endpoint, as the admin API shows it, with its job's
// state when it has one.
type Delivery struct {
	ID            int64      `json:"id"`
	WebhookID     string     `json:"webhook_id"`
	EventID       int64      `json:"event_id"`
	Type          string     `json:"type"`
	MediaID       int64      `json:"media_id"`
	Status        string     `json:"status"`
	JobID         *int64     `json:"job_id,omitempty"`
	Attempts      *int       `json:"attempts,omitempty"`
	LastError     *string    `json:"last_error,omitempty"`
	EventAt       time.Time  `json:"event_at"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// messageID is the webhook-id of the delivery of outbox row event to endpoint: the same on
// every attempt, and different for every (event, endpoint).
func messageID(event, endpoint int64) string {
	return fmt.Sprintf("msg_%d_%d", event, endpoint)
}

// Store reads and writes endpoints.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// maxEndpoints bounds the registered endpoints: each event makes one delivery job per endpoint.
const maxEndpoints = 100

// Create registers an endpoint with a fresh secret and returns it with the secret shown.
func (s *Store) Create(ctx context.Context, url string, events []string, by int64) (Endpoint, error) {
	key := newSecret()
	e := Endpoint{URL: url, Events: events, CreatedBy: by, Secret: FormatSecret(key)}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The count and the insert under one lock, so concurrent registrations cannot pass the
		// bound together.
		if _, err := tx.Exec(ctx, `LOCK TABLE webhook_endpoints IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints`).Scan(&n); err != nil {
			return err
		}
		if n >= maxEndpoints {
			return apperr.Errorf(apperr.Conflict, "at most %d webhook endpoints can be registered; delete one first", maxEndpoints)
		}
		return tx.QueryRow(ctx, `INSERT INTO webhook_endpoints (url, events, secret, created_by) VALUES ($1, $2, $3, $4)
			RETURNING id, created_at`, url, events, key, by).Scan(&e.ID, &e.CreatedAt)
	})
	if err != nil {
		return Endpoint{}, fmt.Errorf("create webhook endpoint: %w", err)
	}
	return e, nil
}

const endpointColumns = `id, url, events, created_by, created_at`

func scanEndpoint(row pgx.CollectableRow) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.ID, &e.URL, &e.Events, &e.CreatedBy, &e.CreatedAt)
	return e, err
}

// List returns every endpoint, oldest first, without secrets.
func (s *Store) List(ctx context.Context) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEndpoint)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return out, nil
}

// Get returns endpoint id without its secret.
func (s *Store) Get(ctx context.Context, id int64) (Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return Endpoint{}, fmt.Errorf("get webhook endpoint %d: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, apperr.Errorf(apperr.NotFound, "webhook %d not found", id)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("get webhook endpoint %d: %w", id, err)
	}
	return e, nil
}

// Delete removes endpoint id and its deliveries. Jobs of deliveries still queued find nothing
// to send and complete.
func (s *Store) Delete(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return apperr.Errorf(apperr.NotFound, "webhook %d not found", id)
	}
	return nil
}

// Deliveries returns up to limit of endpoint id's deliveries, newest first, with their jobs'
// attempts and last errors.
func (s *Store) Deliveries(ctx context.Context, id int64, limit int) ([]Delivery, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT d.id, d.outbox_id, o.kind, d.media_id, d.status, d.job_id, j.attempt_count, j.last_error,
		       d.event_at, d.delivered_at, CASE WHEN j.status = 'PENDING' THEN j.available_at END
		FROM webhook_deliveries d
		JOIN notification_outbox o ON o.id = d.outbox_id
		LEFT JOIN jobs j ON j.id = d.job_id
		WHERE d.endpoint_id = $1 ORDER BY d.id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		var kind string
		err := row.Scan(&d.ID, &d.EventID, &kind, &d.MediaID, &d.Status, &d.JobID, &d.Attempts, &d.LastError,
			&d.EventAt, &d.DeliveredAt, &d.NextAttemptAt)
		d.Type = media.EventType(kind)
		d.WebhookID = messageID(d.EventID, id)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook %d: %w", id, err)
	}
	return out, nil
}

// validEvents reports whether every name in events is an event type.
func validEvents(events []string) bool {
	for _, e := range events {
		if !slices.Contains(media.EventTypes, e) {
			return false
		}
	}
	return true
}
