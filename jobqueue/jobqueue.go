// Package jobqueue is Playhead's durable job queue in PostgreSQL: enqueue inside the caller's
// transaction, claim, heartbeat, fenced finish, the runner that executes jobs, the rescuer,
// the pruner, the metrics and the admin routes. It knows jobs and nothing else: what a job is
// about (a media item, an outbox row) is its kind's business, and kinds (encodejobs, ingest)
// depend on this package, never the other way.
//
// A job is claimed in one short statement (FOR UPDATE SKIP LOCKED, committed at once) that
// gives it a fresh claim token and a lease; no lock or transaction is held while the job runs.
// A running job extends its lease with heartbeats fenced by its token. Every write of a claimed
// job checks, in its WHERE, the id, the PROCESSING status, the claim token and a live lease;
// zero rows is ErrClaimLost. A completion or a death happens in one transaction that first runs
// the kind's Lock hook (its domain rows, in the domain's own order), then the fenced job update,
// then the kind's domain writes, so a lost claim rolls everything back: a worker whose lease
// expired cannot complete a job another worker has claimed since, nor write domain rows for it.
// Domain rows are always locked before the job row (members → media → jobs for the media
// kinds), in one place (Queue.transition) that completions, deaths, the rescuer's sweep and
// the admin retry all go through, so no two writers can deadlock. A retry or a release touches the job row only.
//
// Completions of jobs without domain writes (a kind with no Lock hook, a Result with no
// Commit) are batched, as River's are: the runner's completer collects them for a few
// milliseconds and finishes them in one statement, UPDATE … FROM unnest(ids, tokens), whose
// WHERE is the same fence for each row; a job whose row it does not return had lost its claim.
// Kinds with domain writes still finish one job per transaction (see completer for why). The
// claim itself commits without a WAL flush of its own (see Queue.Claim): no promise rests on
// it, and every write that counts after it flushes it.
//
// The split follows River's: Runner is its producer plus job executor (one per kind per
// node), Rescuer its job rescuer (one per node, for every registered kind), Pruner its job
// cleaner.
package jobqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Status is a job's state.
type Status string

// The job statuses.
const (
	// StatusWaiting is a job of a group waiting for its parents (see group.go).
	StatusWaiting    Status = "WAITING"
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	StatusDead       Status = "DEAD"
)

// ErrClaimLost means the job is no longer ours: the lease expired and another worker may have
// claimed it. Whatever the caller was about to write must not be written.
var ErrClaimLost = errors.New("jobqueue: claim lost")

// Job is a claimed job.
type Job struct {
	ID   int64
	Kind string
	// Subject is the id of the row the job is about, as its kind reads it (a media id for
	// encode and ingest).
	Subject    int64
	ClaimToken string
	// Attempt is this claim's attempt number, from 1.
	Attempt     int
	MaxAttempts int
	EnqueuedAt  time.Time
	// Group is the id of the job's group, 0 for a job enqueued on its own.
	Group int64
	// Args are the job's own parameters (GroupJob.Args), nil when it has none.
	Args json.RawMessage
	// Partition and Priority are the job's fairness partition and priority (Spec).
	Partition string
	Priority  Priority
	// LostLeases counts the leases the job lost before this claim (its worker killed, hung or
	// cut off): they spend none of its attempts.
	LostLeases int
}

// LastAttempt reports whether a failure of this attempt makes the job DEAD.
func (j Job) LastAttempt() bool { return j.Attempt >= j.MaxAttempts }

// TxFunc makes a kind's domain writes (or takes its locks) inside a job's finishing transaction.
type TxFunc func(ctx context.Context, tx pgx.Tx, j Job) error

// Kind is one kind of job: how to run it, and the domain side of its transitions.
type Kind struct {
	// Name is the jobs.kind value. Required.
	Name string
	// Run does the work outside any transaction. On success it returns the writes to make
	// inside the fenced completion. On error it must have cleaned up after itself (deleted the
	// files it wrote). Wrap an error with Permanent when retrying cannot help. A kind
	// registered only for its hooks (on a node that runs no jobs) leaves it nil.
	Run func(ctx context.Context, j Job) (Result, error)
	// Lock locks the kind's domain rows for j, in the domain's order, at the start of every
	// transaction that changes j's status: completion, retry, dead, the rescuer's sweep, an
	// admin retry. The job row is locked only after it returns. Optional; required when
	// Result.Commit, Fail or Revive write rows that other transactions also lock.
	Lock TxFunc
	// Fail writes the domain side of j becoming DEAD (a media FAILED, a notification), in the
	// transaction that marks it DEAD, whoever does: the runner or the rescuer. cause is the last
	// attempt's error; ReasonOf(cause) is what the job's owner may be told, its full text is
	// the job's last_error, for administrators. Optional.
	Fail func(ctx context.Context, tx pgx.Tx, j Job, cause error) error
	// Revive writes the domain side of an admin retry of the DEAD job j (its media PROCESSING
	// again). Optional.
	Revive TxFunc
	// OnParentDead is what becomes of a WAITING job of this kind when a job it waits for
	// goes DEAD. Default CancelWhenParentDead.
	OnParentDead ParentDeadRule
	// Periodic makes the kind's jobs enqueued by a Scheduler, one per run time of its
	// schedule. Optional.
	Periodic *Periodic
	// MaxRunning is the most jobs of the kind PROCESSING under a live lease at once across
	// every node, enforced at claim; a lost node's slots come back as its leases expire.
	// 0 means no limit beyond each node's own concurrency.
	MaxRunning int
	// MaxLostLeases is how many leases a job of the kind may lose (its worker killed, hung or
	// cut off from the database) before the rescuer marks it DEAD: a lost lease spends no
	// attempt, so this is the bound on a job that kills its worker every time. Default
	// DefaultMaxLostLeases.
	MaxLostLeases int
	// LostLeaseBackoff is how long after its lease expired a job that lost it may be claimed
	// again, doubling with each lease it lost, capped at LostLeaseBackoffCap. Default
	// DefaultLostLeaseBackoff.
	LostLeaseBackoff time.Duration
}

// The lost-lease defaults and bound (Kind.MaxLostLeases, Kind.LostLeaseBackoff).
const (
	DefaultMaxLostLeases    = 10
	DefaultLostLeaseBackoff = time.Second
	LostLeaseBackoffCap     = 5 * time.Minute
)

// withDefaults is k with its zero fields given their defaults; a kind the queue does not
// know is all defaults.
func (k Kind) withDefaults() Kind {
	k.MaxLostLeases = cmp.Or(k.MaxLostLeases, DefaultMaxLostLeases)
	k.LostLeaseBackoff = cmp.Or(k.LostLeaseBackoff, DefaultLostLeaseBackoff)
	return k
}

// Result is a successful run, waiting to be committed.
type Result struct {
	// Commit makes the domain writes inside the fenced completion. Optional.
	Commit func(ctx context.Context, tx pgx.Tx) error
	// Discard undoes Run's side effects when the completion certainly did not commit (the
	// claim was lost). It is not called when the outcome cannot be known. Optional.
	Discard func(ctx context.Context)
	// Committed runs after the completion committed: cleanup that only the winner may do,
	// such as deleting what workers that died mid-job left behind. Optional; its failure is
	// logged, the job stays completed.
	Committed func(ctx context.Context) error
}

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the job goes DEAD at once.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[permanentError](err)
	return ok
}

// registry is the kinds one Queue knows, fixed when the Queue is made.
type registry struct {
	kinds map[string]Kind
	names []string // sorted
}

func newRegistry(kinds []Kind) (registry, error) {
	r := registry{kinds: make(map[string]Kind, len(kinds))}
	for _, k := range kinds {
		if k.Name == "" {
			return registry{}, errors.New("jobqueue: a kind needs a Name")
		}
		if k.MaxRunning < 0 || k.MaxLostLeases < 0 || k.LostLeaseBackoff < 0 {
			return registry{}, fmt.Errorf("jobqueue: kind %q has a negative MaxRunning, MaxLostLeases or LostLeaseBackoff", k.Name)
		}
		if k.Periodic != nil && k.Periodic.Schedule == nil {
			return registry{}, fmt.Errorf("jobqueue: periodic kind %q needs a Schedule", k.Name)
		}
		if _, dup := r.kinds[k.Name]; dup {
			return registry{}, fmt.Errorf("jobqueue: kind %q registered twice", k.Name)
		}
		r.kinds[k.Name] = k
		r.names = append(r.names, k.Name)
	}
	slices.Sort(r.names)
	return r, nil
}
