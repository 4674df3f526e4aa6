package jobqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
)

// Concurrent enqueues of one unique key, each in its own transaction on its own connection,
// all held open until every one has inserted, leave exactly one job: one Insert inserts it,
// every other returns its id as Existing. The holders commit in any order.
func TestInsert_UniqueKeyRaceAcrossConnections(t *testing.T) {
	t.Parallel()
	const enqueuers = 8
	b := setup(t)
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []jobqueue.Enqueued
	)
	holding := make(chan struct{}, enqueuers)
	release := make(chan struct{})
	for range enqueuers {
		// A pool of its own per enqueuer: separate connections, as separate nodes have.
		pool := ownPool(t, b.url)
		wg.Go(func() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				e, err := jobqueue.Insert(ctx, tx, jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3, UniqueKey: "media-1"})
				if err != nil {
					return err
				}
				mu.Lock()
				results = append(results, e)
				mu.Unlock()
				if !e.Existing {
					// The holder commits only once every other enqueuer waits on its
					// uncommitted row, or it would be no race.
					holding <- struct{}{}
					<-release
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	receive(t, holding, "the first insert")
	waitFor(t, "the other enqueuers to wait on the holder's row", func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == enqueuers-1
	})
	close(release)
	wg.Wait()
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'encode'`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	fresh := 0
	for _, e := range results {
		if !e.Existing {
			fresh++
		}
		if e.ID != results[0].ID {
			t.Fatalf("the enqueuers got different ids: %+v", results)
		}
	}
	if len(results) != enqueuers || fresh != 1 {
		t.Fatalf("%d results, %d of them new; want %d, 1 new", len(results), fresh, enqueuers)
	}
}

// A unique key is held by a job only while it is WAITING, PENDING or PROCESSING: once it is
// COMPLETED (or DEAD) the key is free and an Insert makes a new job. Keys are unique within a
// kind, and a job without a key is never unique.
func TestInsert_UniqueKeyOnlyWhileUnfinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	spec := jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3, UniqueKey: "k"}
	first := insert(t, b.pool, spec)
	if again := insert(t, b.pool, spec); again.ID != first.ID || !again.Existing {
		t.Fatalf("a duplicate while PENDING = %+v, want job %d, existing", again, first.ID)
	}
	j := claimOne(t, q, "encode")
	if again := insert(t, b.pool, spec); again.ID != first.ID || !again.Existing {
		t.Fatalf("a duplicate while PROCESSING = %+v, want job %d, existing", again, first.ID)
	}
	if other := insert(t, b.pool, jobqueue.Spec{Kind: "rollup", Subject: 1, MaxAttempts: 3, UniqueKey: "k"}); other.Existing {
		t.Fatal("a job of another kind with the same key was refused")
	}
	if err := q.Complete(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	next := insert(t, b.pool, spec)
	if next.Existing || next.ID == first.ID {
		t.Fatalf("after the job COMPLETED: %+v, want a new job", next)
	}
	plain := jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3}
	if a, c := insert(t, b.pool, plain), insert(t, b.pool, plain); a.Existing || c.Existing || a.ID == c.ID {
		t.Fatalf("jobs without a key: %+v %+v, want two new jobs", a, c)
	}
}

// UniqueKeyOf is equal for the same subject, args (whatever the order of their keys), partition
// and period, and differs when any of them differs.
func TestUniqueKeyOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 8, 10, 30, 0, 0, time.UTC)
	key := func(subject int64, args string, partition string, period time.Duration, at time.Time) string {
		t.Helper()
		var raw json.RawMessage
		if args != "" {
			raw = json.RawMessage(args)
		}
		k, err := jobqueue.UniqueKeyOf(subject, raw, partition, period, at)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key(1, `{"a": 1, "b": [2, 3]}`, "p", time.Hour, at)
	for name, same := range map[string]string{
		"keys in another order":    key(1, `{"b":[2,3],"a":1}`, "p", time.Hour, at),
		"later in the same period": key(1, `{"a": 1, "b": [2, 3]}`, "p", time.Hour, at.Add(29*time.Minute)),
	} {
		if same != base {
			t.Errorf("%s: a different key", name)
		}
	}
	for name, other := range map[string]string{
		"another subject":   key(2, `{"a": 1, "b": [2, 3]}`, "p", time.Hour, at),
		"other args":        key(1, `{"a": 2, "b": [2, 3]}`, "p", time.Hour, at),
		"a large id":        key(1, `{"a": 9007199254740993, "b": [2, 3]}`, "p", time.Hour, at),
		"another partition": key(1, `{"a": 1, "b": [2, 3]}`, "q", time.Hour, at),
		"the next period":   key(1, `{"a": 1, "b": [2, 3]}`, "p", time.Hour, at.Add(30*time.Minute)),
		"no args":           key(1, "", "p", time.Hour, at),
	} {
		if other == base {
			t.Errorf("%s: the same key", name)
		}
	}
	if key(1, `{"a": 9007199254740993}`, "", 0, at) == key(1, `{"a": 9007199254740992}`, "", 0, at) {
		t.Error("two large ids that round to the same float64 give the same key")
	}
	if key(1, "", "", 0, at) != key(1, "", "", 0, at.Add(24*time.Hour)) {
		t.Error("without a period, the time changed the key")
	}
	for _, bad := range []string{`{`, `{"a": 1} {"a": 2}`, `{"a": 1}}`, `{"a": 1} x`} {
		if _, err := jobqueue.UniqueKeyOf(1, json.RawMessage(bad), "", 0, at); err == nil {
			t.Errorf("args %s, not one JSON value, gave a key", bad)
		}
	}
}

// afterConflict is a pgx tracer that calls do once, after the first insert that inserted
// nothing (ON CONFLICT DO NOTHING) and before the statement that follows it.
type afterConflict struct {
	once sync.Once
	do   func()
}

func (a *afterConflict) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (a *afterConflict) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil && data.CommandTag.String() == "INSERT 0 0" {
		a.once.Do(a.do)
	}
}

// The holder of a unique key that finishes between Insert's conflict and its read of the
// holder frees the key: Insert tries again and inserts a new job, neither failing nor
// answering the finished job's id.
func TestInsert_UniqueKeyHolderFinishingMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	spec := jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3, UniqueKey: "k"}
	holder := insert(t, b.pool, spec)
	running := claimOne(t, q, "encode")
	finished := false
	tracer := &afterConflict{do: func() {
		if err := q.Complete(ctx, running, nil); err != nil {
			t.Error(err)
		}
		finished = true
	}}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	got := insert(t, traced, spec)
	if !finished {
		t.Fatal("the insert met no conflict: the holder's finish in between was not tested")
	}
	if got.Existing || got.ID == holder.ID {
		t.Fatalf("after the holder finished in between: %+v, want a new job (the holder was %d)", got, holder.ID)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE unique_key = 'k' AND status = 'PENDING'`); n != 1 {
		t.Fatalf("%d PENDING jobs hold the key, want 1", n)
	}
}

// An administrator's retry of a DEAD unique job whose key a newer unfinished job of its kind
// now holds is refused (409, naming that job), not failed on the unique index; once the newer
// job finishes, the retry goes through.
func TestRetryDead_UniqueKeyHeldByANewerJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := newQueue(t, b.pool, time.Minute, jobqueue.Kind{Name: "encode"})
	spec := jobqueue.Spec{Kind: "encode", Subject: 1, MaxAttempts: 3, UniqueKey: "k"}
	dead := insert(t, b.pool, spec)
	if err := q.Dead(ctx, claimOne(t, q, "encode"), errors.New("broken")); err != nil {
		t.Fatal(err)
	}
	newer := insert(t, b.pool, spec)
	if newer.Existing {
		t.Fatal("a DEAD job still held its unique key")
	}
	err := q.RetryDead(ctx, dead.ID)
	if apperr.CodeOf(err) != apperr.Conflict || !strings.Contains(err.Error(), fmt.Sprintf("held by job %d", newer.ID)) {
		t.Fatalf("retry while job %d holds the key: %v, want a conflict naming it", newer.ID, err)
	}
	if err := q.Complete(ctx, claimOne(t, q, "encode"), nil); err != nil {
		t.Fatal(err)
	}
	if err := q.RetryDead(ctx, dead.ID); err != nil {
		t.Fatalf("retry once the newer job finished: %v", err)
	}
}
