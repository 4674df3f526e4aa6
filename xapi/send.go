package xapi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/backoff"
	"github.com/playhead/playhead/egress"
	"github.com/playhead/playhead/jobqueue"
)

// KindSend is the queue kind of a statement's delivery; a job's subject is the statement's row
// (xapi_statements.id).
const KindSend = "xapi_statement"

// JobKind returns the statement kind's hooks, without its Run (an api node registers it so that
// an admin can retry a DEAD statement). A statement that goes DEAD is kept, marked so, until
// an admin retry or the event history's retention.
func JobKind() jobqueue.Kind {
	return jobqueue.Kind{
		Name: KindSend,
		Fail: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job, _ error) error {
			_, err := tx.Exec(ctx, `UPDATE xapi_statements SET status = 'DEAD', dead_at = statement_timestamp() WHERE id = $1`, j.Subject)
			return err
		},
		Revive: func(ctx context.Context, tx pgx.Tx, j jobqueue.Job) error {
			tag, err := tx.Exec(ctx, `UPDATE xapi_statements SET status = 'QUEUED', dead_at = NULL WHERE id = $1 AND status = 'DEAD'`, j.Subject)
			if err == nil && tag.RowsAffected() == 0 {
				return apperr.Errorf(apperr.Conflict, "xAPI statement %d is gone (pruned after PLAYHEAD_OUTBOX_RETENTION, or its member erased): nothing to send again", j.Subject)
			}
			return err
		},
	}
}

// SenderConfig configures a Sender. Zero values take the defaults named on each field.
type SenderConfig struct {
	// Pool reads the statements. Required.
	Pool *pgxpool.Pool
	// Endpoint is the LRS's base URL (PLAYHEAD_XAPI_ENDPOINT); statements go to
	// Endpoint/statements. Empty: xAPI is off, and a job finds nothing to send to (DEAD).
	Endpoint string
	// Username and Password are the LRS's HTTP Basic credentials (its key and secret), none
	// when Username is empty.
	Username, Password string
	// AllowPrivate lets the LRS be on loopback and private addresses (PLAYHEAD_XAPI_ALLOW_PRIVATE).
	AllowPrivate bool
	// Timeout bounds one attempt, from connect to the end of the response. Default 15 s.
	Timeout time.Duration
	// Metrics receives the attempts' results. Optional.
	Metrics *Metrics
}

// Sender runs statement jobs: one POST of the stored statement per attempt.
type Sender struct {
	cfg    SenderConfig
	client *http.Client
}

// NewSender returns a Sender whose connections go through the egress address policy (checked
// on the address dialled, after DNS resolution), never through a proxy, never following
// redirects: the same client as the webhooks'.
func NewSender(cfg SenderConfig) *Sender {
	cfg.Timeout = cmp.Or(cfg.Timeout, 15*time.Second)
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		dialer.Control = egress.Control(egress.Public)
	}
	client := &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    cfg.Timeout,
			ResponseHeaderTimeout:  cfg.Timeout,
			MaxResponseHeaderBytes: 16 << 10,
		},
		Timeout: cfg.Timeout,
		// An LRS that redirects is misconfigured; following could lead anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Sender{cfg: cfg, client: client}
}

// Kind returns the statement kind with its Run.
func (s *Sender) Kind() jobqueue.Kind {
	k := JobKind()
	k.Run = s.run
	return k
}

// Version is the xAPI version Playhead speaks, sent in every request's
// X-Experience-API-Version.
const Version = "1.0.3"

// maxResponseBytes is how much of an LRS's answer is read: the status is all that is used.
const maxResponseBytes = 64 << 10

// errOff is a statement job run while xAPI is off.
var errOff = errors.New("xAPI is off (PLAYHEAD_XAPI_ENDPOINT is unset): set it and retry the job")

// run sends one attempt of a statement. The LRS's 2xx stores it; its 409 means it already has
// a statement of that id (an earlier attempt whose answer was lost), which it keeps: both
// delete the row. A 429 or 5xx, or no answer, is retried with backoff (after Retry-After when
// given); any other 4xx is the LRS refusing the statement, which no retry changes: DEAD, with
// the answer's status and start in the job's last error.
func (s *Sender) run(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
	var body []byte
	err := s.cfg.Pool.QueryRow(ctx, `SELECT body FROM xapi_statements WHERE id = $1`, j.Subject).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobqueue.Result{}, nil // its member was erased: nothing to send
	}
	if err != nil {
		return jobqueue.Result{}, fmt.Errorf("read xAPI statement %d: %w", j.Subject, err)
	}
	if s.cfg.Endpoint == "" {
		s.cfg.Metrics.count(resultOff)
		return jobqueue.Result{}, jobqueue.Permanent(errOff)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.cfg.Endpoint, "/")+"/statements", bytes.NewReader(body))
	if err != nil {
		return jobqueue.Result{}, jobqueue.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Experience-API-Version", Version)
	if s.cfg.Username != "" {
		req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	}
	result, err := s.send(req)
	s.cfg.Metrics.count(result)
	if err != nil {
		return jobqueue.Result{}, err
	}
	return jobqueue.Result{Commit: func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM xapi_statements WHERE id = $1`, j.Subject)
		return err
	}}, nil
}

// send posts req and returns the attempt's result label and, unless the LRS has the statement,
// the error the queue acts on.
func (s *Sender) send(req *http.Request) (string, error) {
	resp, err := s.client.Do(req)
	if errors.Is(err, egress.ErrForbiddenAddress) {
		return resultRefused, jobqueue.Permanent(err)
	}
	if err != nil {
		return resultUnreachable, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return resultStored, nil
	case code == http.StatusConflict:
		return resultDuplicate, nil
	case code == http.StatusTooManyRequests || code >= 500:
		err := fmt.Errorf("the LRS answered HTTP %d", code)
		if after := backoff.ParseRetryAfter(resp.Header.Get("Retry-After")); after > 0 {
			return resultUnavailable, jobqueue.RetryAfter(err, after)
		}
		return resultUnavailable, err
	default:
		return resultRejected, jobqueue.Permanent(fmt.Errorf("the LRS refused the statement: HTTP %d: %.200q", code, answer))
	}
}

// The results of one attempt, the values of playhead_xapi_statements_total's result label.
const (
	resultStored      = "stored"      // a 2xx answer
	resultDuplicate   = "duplicate"   // 409: the LRS already has a statement of that id
	resultRejected    = "rejected"    // another 4xx: the statement is DEAD
	resultUnavailable = "unavailable" // 429 or 5xx: retried
	resultUnreachable = "unreachable" // no answer (connection error, timeout): retried
	resultRefused     = "refused"     // the address is not allowed (egress policy): DEAD
	resultOff         = "off"         // xAPI is off on the node that ran the job: DEAD
)

// Metrics are the xAPI figures. A nil *Metrics records nothing.
type Metrics struct {
	statements *prometheus.CounterVec
}

// NewMetrics creates the statement counter and registers it with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{statements: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "playhead", Subsystem: "xapi", Name: "statements_total",
		Help: "Attempts to send an xAPI statement to the LRS made by this node, by result: stored (2xx), duplicate (409: it had the id already), rejected (another 4xx: DEAD), unavailable (429 or 5xx: retried), unreachable (no answer: retried), refused (address not allowed: DEAD), off (xAPI off on this node: DEAD).",
	}, []string{"result"})}
	// Every result's series exists from the start, at 0: rate() sees the first increase too.
	for _, r := range []string{resultStored, resultDuplicate, resultRejected, resultUnavailable, resultUnreachable, resultRefused, resultOff} {
		m.statements.WithLabelValues(r)
	}
	reg.MustRegister(m.statements)
	return m
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.statements.WithLabelValues(result).Inc()
	}
}
