package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/backoff"
	"github.com/playhead/playhead/egress"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// KindDeliver is the queue kind of a webhook delivery; a job's subject is the delivery's id.
const KindDeliver = "webhook"

// JobKind returns the delivery kind's hooks, without its Run (an api node registers it so that
// an admin can retry a DEAD delivery). maxAttempts is what the next delivery of a chain is
// enqueued with when one ends.
//
// Every transition of a delivery job takes its chain's lock first (before the job row, as the
// queue core asks). A delivery that goes DEAD is given up on: it is marked so, and the next
// one of its chain is enqueued; an admin retry makes it QUEUED again (without holding back the
// newer deliveries queued meanwhile: a manual retry is out of order by nature).
func JobKind(maxAttempts int) jobqueue.Kind {
	return jobqueue.Kind{
		Name: KindDeliver,
		Lock: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
			c, ok, err := chainOf(ctx, tx, j.Subject)
			if err != nil || !ok {
				return err
			}
			return lockChain(ctx, tx, c)
		},
		Fail: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job, _ error) error {
			return finish(ctx, tx, j.Subject, "DEAD", maxAttempts)
		},
		// A DEAD delivery's job outlives its delivery (PLAYHEAD_RETENTION_DEAD, 30 days, against
		// PLAYHEAD_OUTBOX_RETENTION, 7): a retry of a job whose delivery is gone is refused, not
		// answered 202 for a job that would send nothing.
		Revive: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
			tag, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'QUEUED', finished_at = NULL WHERE id = $1 AND status = 'DEAD'`, j.Subject)
			if err == nil && tag.RowsAffected() == 0 {
				return apperr.Errorf(apperr.Conflict, "webhook delivery %d is gone (pruned after PLAYHEAD_OUTBOX_RETENTION, or its endpoint deleted): nothing to send again", j.Subject)
			}
			return err
		},
	}
}

// chainOf returns the chain of delivery id; ok is false when the delivery is gone (its
// endpoint was deleted).
func chainOf(ctx context.Context, tx pgx.Tx, id int64) (chain, bool, error) {
	var c chain
	err := tx.QueryRow(ctx, `SELECT endpoint_id, media_id FROM webhook_deliveries WHERE id = $1`, id).Scan(&c.endpoint, &c.media)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("read webhook delivery %d: %w", id, err)
	}
	return c, true, nil
}

// finish records that delivery id ended (DELIVERED or DEAD) and enqueues the next of its chain.
func finish(ctx context.Context, tx pgx.Tx, id int64, status string, maxAttempts int) error {
	var c chain
	err := tx.QueryRow(ctx, `
		UPDATE webhook_deliveries SET status = $2, finished_at = statement_timestamp(),
		       delivered_at = CASE WHEN $2 = 'DELIVERED' THEN statement_timestamp() END
		WHERE id = $1 RETURNING endpoint_id, media_id`, id, status).Scan(&c.endpoint, &c.media)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the endpoint was deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("mark webhook delivery %d %s: %w", id, status, err)
	}
	return advance(ctx, tx, c, maxAttempts)
}

// SenderConfig configures a Sender. Zero values take the defaults named on each field.
type SenderConfig struct {
	// Pool reads the deliveries. Required.
	Pool *pgxpool.Pool
	// AllowPrivate lets deliveries reach loopback and private addresses (tests only).
	AllowPrivate bool
	// Timeout bounds one attempt, from connect to the end of the response. Default 15 s.
	Timeout time.Duration
	// MaxResponseBytes is how much of a response body is read (and thrown away) at most; the
	// connection is closed after it. Default 64 KiB.
	MaxResponseBytes int64
	// MaxAttempts is the number of attempts of each delivery job. Default 12.
	MaxAttempts int
	// Metrics receives delivery figures. Optional.
	Metrics *Metrics
}

// Sender runs delivery jobs: it sends one signed POST per attempt.
type Sender struct {
	cfg    SenderConfig
	client *http.Client
}

// NewSender returns a Sender whose connections go through the egress address policy (checked
// on the address dialled, so a name that resolves to a private address since its registration
// is refused too), never through a proxy, never following redirects.
func NewSender(cfg SenderConfig) *Sender {
	cfg.Timeout = cmp.Or(cfg.Timeout, 15*time.Second)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, 64<<10)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 12)
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		dialer.Control = egress.Control(egress.Public)
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 16 << 10,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		// A receiver that redirects is misconfigured; following could lead anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Sender{cfg: cfg, client: client}
}

// Kind returns the delivery kind with its Run.
func (s *Sender) Kind() jobqueue.Kind {
	k := JobKind(s.cfg.MaxAttempts)
	k.Run = s.run
	return k
}

// message is one delivery as sent.
type message struct {
	id   string
	url  string
	key  []byte
	body []byte
}

// load reads delivery id; ok is false when it is gone (its endpoint was deleted). The body is
// built from the outbox row alone, so every attempt sends the same bytes.
func (s *Sender) load(ctx context.Context, id int64) (message, bool, error) {
	var m message
	var endpoint int64
	var row media.OutboxRow
	err := s.cfg.Pool.QueryRow(ctx, `
		SELECT e.id, e.url, e.secret, o.id, o.kind, o.media_id, o.member_id, o.created_at, o.payload
		FROM webhook_deliveries d
		JOIN webhook_endpoints e ON e.id = d.endpoint_id
		JOIN notification_outbox o ON o.id = d.outbox_id
		WHERE d.id = $1`, id).Scan(&endpoint, &m.url, &m.key, &row.ID, &row.Kind, &row.MediaID, &row.MemberID, &row.CreatedAt, &row.Payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read webhook delivery %d: %w", id, err)
	}
	m.id = messageID(row.ID, endpoint)
	if m.body, err = json.Marshal(row.Body()); err != nil {
		return m, false, err
	}
	return m, true, nil
}

// run sends one attempt of a delivery. A 2xx answer delivers it; anything else is an error the
// queue retries with backoff (after the receiver's Retry-After when it sent one), except an
// address the policy refuses, which no retry can fix.
func (s *Sender) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	m, ok, err := s.load(ctx, j.Subject)
	if err != nil {
		return jobqueue.Result{}, err
	}
	if !ok {
		return jobqueue.Result{}, nil // nothing left to deliver
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(m.body))
	if err != nil {
		return jobqueue.Result{}, jobqueue.Permanent(err)
	}
	setHeaders(req.Header, m.key, m.id, time.Now(), m.body)
	start := time.Now()
	err = s.send(req)
	s.cfg.Metrics.attempt(err, time.Since(start))
	if err != nil {
		return jobqueue.Result{}, err
	}
	return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
		return finish(ctx, tx, j.Subject, "DELIVERED", s.cfg.MaxAttempts)
	}}, nil
}

// errRejected is a receiver's answer that is not 2xx.
var errRejected = errors.New("the receiver did not answer 2xx")

func (s *Sender) send(req *http.Request) error {
	resp, err := s.client.Do(req)
	if errors.Is(err, egress.ErrForbiddenAddress) {
		return jobqueue.Permanent(err)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Read a bounded part of the answer (receivers' bodies are not used), then drop the
	// connection: a receiver cannot make the sender read or hold more.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.cfg.MaxResponseBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("%w: HTTP %d from %s", errRejected, resp.StatusCode, req.URL.Host)
	if after := backoff.ParseRetryAfter(resp.Header.Get("Retry-After")); after > 0 {
		return jobqueue.RetryAfter(err, after)
	}
	return err
}
