package jobqueue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/notify"
)

// Priority orders the jobs of one kind beyond their turns: a job of a lower priority (a larger
// number) waits PriorityStep turns per level behind a job of the level above, and no more, so
// it is never starved.
type Priority int16

// The priorities.
const (
	PriorityHigh   Priority = 1
	PriorityNormal Priority = 2
	PriorityLow    Priority = 3
)

// PriorityStep is the penalty, in turns, of each priority level below PriorityHigh: a job's
// claim order is its turn plus (priority − 1) × PriorityStep (the jobs.claim_order column of
// migration 00035 holds the same constant).
const PriorityStep = 100

// Spec is one job to enqueue.
type Spec struct {
	// Kind and Subject are the job's kind and the id of the row it is about. Required.
	Kind    string
	Subject int64
	// MaxAttempts is how many attempts the job has, from 1. Required.
	MaxAttempts int
	// Args are the job's own parameters, a JSON object (Job.Args). Optional.
	Args json.RawMessage
	// Partition is the job's fairness partition: the partitions of a kind take turns, so one
	// partition's backlog delays another's job by at most one job of each busy partition per
	// turn. "" is a partition like any other (every job in "" is first in, first out).
	Partition string
	// Priority within the kind; 0 means PriorityNormal.
	Priority Priority
	// UniqueKey, when set, makes the job unique among the WAITING, PENDING and PROCESSING
	// jobs of its kind (see Insert and UniqueKeyOf). "" means not unique.
	UniqueKey string
}

// Enqueued is what Insert did.
type Enqueued struct {
	// ID is the job's id: the new job's, or the existing one's.
	ID int64
	// Existing reports that a job of the kind already held the spec's UniqueKey: nothing was
	// inserted.
	Existing bool
}

// Insert enqueues spec inside the caller's transaction, so the job exists exactly when the
// caller's change commits, and wakes idle runners of its kind on commit.
//
// When spec.UniqueKey is set and a WAITING, PENDING or PROCESSING job of the kind holds it,
// Insert returns that job's id with Existing and inserts nothing. This is race-free across
// transactions and nodes: the insert goes through the partial unique index (ON CONFLICT DO
// NOTHING waits for a concurrent holder's transaction to end), and the holder is then read
// with a fresh snapshot; when it finished in between, Insert tries again.
func Insert(ctx context.Context, tx pgx.Tx, spec Spec) (Enqueued, error) {
	if err := spec.validate(); err != nil {
		return Enqueued{}, err
	}
	var args *string
	if spec.Args != nil {
		s := string(spec.Args)
		args = &s
	}
	var key *string
	if spec.UniqueKey != "" {
		key = &spec.UniqueKey
	}
	for {
		var id int64
		err := tx.QueryRow(ctx, insertSQL, spec.Kind, spec.Subject, spec.MaxAttempts, args,
			spec.Partition, int16(spec.priority()), key).Scan(&id)
		switch {
		case err == nil:
			return Enqueued{ID: id}, notify.Send(ctx, tx, Channel, spec.Kind)
		case !errors.Is(err, pgx.ErrNoRows):
			return Enqueued{}, fmt.Errorf("enqueue %s job: %w", spec.Kind, err)
		}
		// A job of the kind holds the key (ON CONFLICT DO NOTHING returned no row).
		err = tx.QueryRow(ctx, `SELECT id FROM jobs WHERE kind = $1 AND unique_key = $2 AND status IN ('WAITING', 'PENDING', 'PROCESSING')`,
			spec.Kind, spec.UniqueKey).Scan(&id)
		switch {
		case err == nil:
			return Enqueued{ID: id, Existing: true}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return Enqueued{}, fmt.Errorf("enqueue %s job: find the holder of its unique key: %w", spec.Kind, err)
		}
		// The holder finished between the two statements: the key is free again.
		if err := ctx.Err(); err != nil {
			return Enqueued{}, err
		}
	}
}

// insertSQL inserts one job with its turn (nextTurn), unless its unique key is held.
var insertSQL = `
INSERT INTO jobs (kind, subject_id, max_attempts, args, partition_key, priority, unique_key, fair_turn)
VALUES ($1, $2, $3, $4, $5, $6, $7, ` + nextTurn("$1", "$5", "$6") + `)
ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND status IN ('WAITING', 'PENDING', 'PROCESSING') DO NOTHING
RETURNING id`

// nextTurn is the SQL expression of the turn of a new job of kind, partition and priority
// (SQL expressions: parameters or columns), start-time fair queuing: the later of the kind's
// virtual time and the turn after the last one its partition holds at its priority among the
// kind's PENDING and WAITING jobs (one probe of jobs_partition_turn_idx). A partition's backlog
// thus takes consecutive turns, and a job of a partition with nothing queued takes the virtual
// time itself: it runs after the jobs of that turn already queued, at most one of each busy
// partition.
//
// The virtual time is the later of the turn of the head of the claim order (the first PENDING
// and due job by claim_order, id: a scan of jobs_pending_kind_idx that, like the claim's, passes
// over the jobs in back-off ahead of it; the first PENDING job when none is due) and the turn
// after the latest among the kind's PROCESSING jobs (a read of the kind's running jobs in
// jobs_processing_kind_idx, as many as run at once). A job in back-off is passed over because
// it keeps the turn it was enqueued with: as the head, it would hold the virtual time back by
// every turn claimed since, and a new partition's backlog enqueued while nothing of the kind
// runs would take those old turns and pass a busy partition's whole backlog
// (TestFairness_AJobInBackoffDoesNotHoldBackTheVirtualTime). The head alone is not enough: while a job
// of a lower priority is the head, jobs of a higher priority that arrive one at a time, each
// claimed before the next comes, would all take the head's turn and pass it for ever. With
// the running jobs' turns, each takes a turn past the one before, and the low job's claim order
// is reached within its penalty (TestPriority_LowIsNotStarved).
func nextTurn(kind, partition, priority string) string {
	return `greatest(
    coalesce((SELECT fair_turn FROM jobs WHERE kind = ` + kind + ` AND status = 'PENDING' AND available_at <= statement_timestamp()
              ORDER BY claim_order, id LIMIT 1),
              (SELECT fair_turn FROM jobs WHERE kind = ` + kind + ` AND status = 'PENDING' ORDER BY claim_order, id LIMIT 1), 0),
    coalesce((SELECT max(fair_turn) FROM jobs WHERE kind = ` + kind + ` AND status = 'PROCESSING'), -1) + 1,
    coalesce((SELECT fair_turn FROM jobs WHERE kind = ` + kind + ` AND partition_key = ` + partition + ` AND priority = ` + priority + `
              AND status IN ('PENDING', 'WAITING') ORDER BY fair_turn DESC LIMIT 1), 0) + 1)`
}

func (s Spec) validate() error {
	switch {
	case s.Kind == "":
		return errors.New("jobqueue: a job needs a Kind")
	case s.MaxAttempts < 1:
		return fmt.Errorf("jobqueue: a %s job needs MaxAttempts ≥ 1", s.Kind)
	case s.Priority != 0 && (s.Priority < PriorityHigh || s.Priority > PriorityLow):
		return fmt.Errorf("jobqueue: a %s job has priority %d, not 1 (high) to 3 (low)", s.Kind, s.Priority)
	case s.Args != nil && !isJSONObject(s.Args):
		return fmt.Errorf("jobqueue: a %s job has Args that are not a JSON object", s.Kind)
	}
	return nil
}

func (s Spec) priority() Priority {
	if s.Priority == 0 {
		return PriorityNormal
	}
	return s.Priority
}

func isJSONObject(raw json.RawMessage) bool {
	return json.Valid(raw) && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{"))
}

// UniqueKeyOf builds a unique key from what makes two jobs the same: their subject, their
// args (one JSON value, compared as a value: neither the order of an object's keys nor spaces
// matter, though numbers compare as written, 1 and 1.0 differing), their partition and, when
// period is positive, the period of at (at truncated to a multiple of period since the zero
// time): a job enqueued in a later period is a new job. A job's kind is not part of the key:
// keys are unique within a kind.
func UniqueKeyOf(subject int64, args json.RawMessage, partition string, period time.Duration, at time.Time) (string, error) {
	canonical := []byte("null")
	if len(args) > 0 {
		// Decode reads one value: what follows it would be left out of the key.
		if !json.Valid(args) {
			return "", errors.New("jobqueue: unique key: args are not one JSON value")
		}
		// Numbers stay as written (json.Number), not float64s that would round large ids.
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return "", fmt.Errorf("jobqueue: unique key: args: %w", err)
		}
		var err error
		// Marshal writes an object's keys sorted: equal values give equal bytes.
		if canonical, err = json.Marshal(v); err != nil {
			return "", fmt.Errorf("jobqueue: unique key: args: %w", err)
		}
	}
	var bucket int64
	if period > 0 {
		bucket = at.Truncate(period).Unix()
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(strconv.FormatInt(subject, 10)), canonical, []byte(partition), []byte(strconv.FormatInt(bucket, 10))} {
		// Each part is length-prefixed, so no two different tuples hash the same bytes.
		h.Write([]byte(strconv.Itoa(len(part)) + ":"))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
