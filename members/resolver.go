// Package members maps the subjects of an identity provider's tokens to Playhead's member ids.
//
// A provider names a person by (issuer, subject): strings such as "auth0|6571a…" or a UUID.
// Every table is keyed by a bigint member id, so the first token of a subject creates a row of
// member_subjects (and the member's row) in one statement, from a sequence that starts above
// the ids the shared-secret mode uses (migration 00029 says why), and the Resolver keeps the
// mapping in memory from then on.
//
// The pair is personal data. An erasure (package erasure) deletes the mapping in the same
// transaction as the erasure record, which keeps only the pair's digest and the time: a token
// of the subject issued before the erasure is refused, one issued after it maps to a new
// member (the person signed up again).
package members

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/erasure"
)

// Bounds of a subject and an issuer, in bytes (member_subjects' CHECKs).
const (
	MaxSubjectBytes = 255
	MaxIssuerBytes  = 2048
)

// FirstID is the first id handed to a member known by a subject (member_subject_ids' start,
// 2^40). The shared-secret mode's numeric subjects stay below it (auth refuses larger ones).
const FirstID = auth.MaxSecretMember + 1

// ErrErased is the answer to a token of an erased subject issued before the erasure (or with
// no iat, which cannot show it was not).
var ErrErased = apperr.Errorf(apperr.Unauthenticated, "this member is erased; sign in again to start a new account")

// Config configures a Resolver. Zero values take the defaults named on each field.
type Config struct {
	// MaxCached bounds the subjects held in memory. Default 100 000 (about 20 MiB with
	// subjects of a hundred bytes).
	MaxCached int
	// Erased reports whether a member is erased as far as this node knows (erasure.Set's
	// Contains): a cached mapping to such a member is dropped and read again. Optional.
	Erased func(member int64) bool
	// Registerer receives the metrics. Optional.
	Registerer prometheus.Registerer
	// LoadTimeout bounds one look-up in the database (a first sight, or a subject no longer
	// cached): past it Member returns the context's error, which the verifier answers 503, so
	// a database that does not answer cannot hold requests. 0: no bound but the caller's.
	LoadTimeout time.Duration
}

// Resolver answers the member id of a token's (issuer, subject), creating it on first sight.
// It is safe for concurrent use.
type Resolver struct {
	pool *pgxpool.Pool
	cfg  Config

	created prometheus.Counter
	hits    prometheus.Counter
	misses  prometheus.Counter

	mu     sync.Mutex
	cached map[string]entry // by issuer, NUL, subject
}

// entry is what a node knows of one subject. member 0: no mapping is known, only that the
// subject was erased at erasedAt (a refused token's lookup). erasedAt zero: never erased.
type entry struct {
	member   int64
	erasedAt time.Time
}

// NewResolver returns a Resolver reading and writing member_subjects on pool.
func NewResolver(pool *pgxpool.Pool, cfg Config) *Resolver {
	cfg.MaxCached = cmp.Or(cfg.MaxCached, 100_000)
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "members", Name: name, Help: help})
	}
	r := &Resolver{
		pool:    pool,
		cfg:     cfg,
		created: counter("created_total", "Members created on the first sight of a token's (issuer, subject)."),
		hits:    counter("resolver_hits_total", "Subjects answered from this node's memory."),
		misses:  counter("resolver_misses_total", "Subjects looked up in the database (first sight, evicted, or of an erased member)."),
		cached:  make(map[string]entry),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(r.created, r.hits, r.misses)
	}
	return r
}

// Member returns the member id of subject at issuer, creating the member on first sight.
// issuedAt is the token's iat (zero: none). A subject too long, empty or not UTF-8, and a token
// of an erased subject issued before its erasure, answer an apperr.Unauthenticated error;
// database errors are returned as they are.
func (r *Resolver) Member(ctx context.Context, issuer, subject string, issuedAt time.Time) (int64, error) {
	if err := checkSubject(issuer, subject); err != nil {
		return 0, err
	}
	key := issuer + "\x00" + subject
	r.mu.Lock()
	e, ok := r.cached[key]
	// The Set learns of an erasure after it committed: the record and the deleted mapping are
	// there to read again.
	if ok && e.member != 0 && r.cfg.Erased != nil && r.cfg.Erased(e.member) {
		delete(r.cached, key)
		ok = false
	}
	r.mu.Unlock()
	if ok && (e.member != 0 || refused(e, issuedAt)) {
		r.hits.Inc()
		return answer(e, issuedAt)
	}
	r.misses.Inc()
	if r.cfg.LoadTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.LoadTimeout)
		defer cancel()
	}
	e, err := r.load(ctx, issuer, subject, issuedAt)
	if err != nil {
		return 0, err
	}
	r.store(key, e)
	return answer(e, issuedAt)
}

// refused reports whether a token issued at issuedAt predates the subject's last erasure. A
// token without iat (zero, the year 1) predates every erasure: nothing shows it does not.
func refused(e entry, issuedAt time.Time) bool {
	return !e.erasedAt.IsZero() && issuedAt.Before(e.erasedAt)
}

func answer(e entry, issuedAt time.Time) (int64, error) {
	if refused(e, issuedAt) {
		return 0, ErrErased
	}
	return e.member, nil
}

// store caches e under key. A full cache drops an arbitrary entry (Go's map order): a dropped
// subject costs one query on its next token, and no order of eviction needs to be kept on the
// path of every request.
func (r *Resolver) store(key string, e entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cached[key]; !ok && len(r.cached) >= r.cfg.MaxCached {
		for k := range r.cached {
			delete(r.cached, k)
			break
		}
	}
	r.cached[key] = e
}

// checkSubject refuses what member_subjects cannot hold, before the database would refuse it
// as an error.
func checkSubject(issuer, subject string) error {
	switch {
	case subject == "" || issuer == "":
		return apperr.Errorf(apperr.Unauthenticated, "the token names no subject or no issuer")
	case len(subject) > MaxSubjectBytes:
		return apperr.Errorf(apperr.Unauthenticated, "the token's subject is longer than %d bytes", MaxSubjectBytes)
	case len(issuer) > MaxIssuerBytes:
		return apperr.Errorf(apperr.Unauthenticated, "the token's issuer is longer than %d bytes", MaxIssuerBytes)
	case !utf8.ValidString(subject) || !utf8.ValidString(issuer) || strings.ContainsRune(subject+issuer, 0):
		// PostgreSQL's text holds neither invalid UTF-8 nor NUL.
		return apperr.Errorf(apperr.Unauthenticated, "the token's subject or issuer is not valid UTF-8 text")
	}
	return nil
}

// firstSightSQL creates the subject's member unless the subject is mapped already or the token
// ($3, its iat) predates the subject's last erasure, and returns the new id (NULL: not created)
// and that erasure's time (NULL: never erased). It runs after erasure.FenceSQL in the same
// transaction, so an erasure in flight has committed (its record and its deleted mapping are
// read here) or waits for this one. The sequence may advance without a row (a conflict): ids
// are not dense. The members row comes in the same statement; member_subjects' foreign key is
// checked at its end.
const firstSightSQL = `
WITH erased AS (
	SELECT max(erased_at) AS at FROM member_erasures WHERE subject_digest = playhead_subject_digest($1, $2)
), fresh AS (
	SELECT nextval('member_subject_ids') AS id FROM erased
	WHERE at IS NULL OR ($3::timestamptz IS NOT NULL AND $3::timestamptz >= at)
), mapped AS (
	INSERT INTO member_subjects (issuer, subject, member_id) SELECT $1, $2, id FROM fresh
	ON CONFLICT (issuer, subject) DO NOTHING
	RETURNING member_id
), member AS (
	INSERT INTO members (id) SELECT member_id FROM mapped
)
SELECT (SELECT member_id FROM mapped), (SELECT at FROM erased)`

// mappedSQL reads an existing mapping: a statement of its own, whose snapshot sees the row
// another transaction committed while firstSightSQL's insert waited on it.
const mappedSQL = `SELECT member_id FROM member_subjects WHERE issuer = $1 AND subject = $2`

// load reads or creates the subject's entry. Two nodes seeing a new subject at once insert the
// same key: one inserts, the other's ON CONFLICT waits for it and reads its row next.
func (r *Resolver) load(ctx context.Context, issuer, subject string, issuedAt time.Time) (entry, error) {
	var iat *time.Time
	if !issuedAt.IsZero() {
		iat = &issuedAt
	}
	// A mapping deleted by an erasure between the two statements is looked up again: the next
	// round reads that erasure's record.
	for range 3 {
		var created *int64
		var erasedAt *time.Time
		b := &pgx.Batch{}
		erasure.Fence(b)
		b.Queue(firstSightSQL, issuer, subject, iat).QueryRow(func(row pgx.Row) error {
			return row.Scan(&created, &erasedAt)
		})
		if err := r.pool.SendBatch(ctx, b).Close(); err != nil {
			return entry{}, fmt.Errorf("map subject: %w", err)
		}
		e := entry{}
		if erasedAt != nil {
			e.erasedAt = *erasedAt
		}
		switch {
		case created != nil:
			r.created.Inc()
			e.member = *created
			return e, nil
		case refused(e, issuedAt):
			return e, nil
		}
		err := r.pool.QueryRow(ctx, mappedSQL, issuer, subject).Scan(&e.member)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return entry{}, fmt.Errorf("read subject's member: %w", err)
		}
		return e, nil
	}
	return entry{}, errors.New("map subject: its mapping was deleted three times in a row")
}
