// Package erasure erases members and fences every writer that names one.
//
// An erasure is a record (member_erasures: the id and the time, nothing else) and a job that
// deletes what is stored. The record retires the id for good: every later write naming it is a
// no-op and every token naming it answers 401. Positions of the member may still sit in the
// buffers of several nodes and in spill files, and a flush may have taken its batch before the
// erasure; the fence makes sure none of them brings a row back:
//
//   - every transaction that writes a row naming a member first runs FenceSQL (the shared side
//     of one advisory lock) as a statement of its own, then anti-joins member_erasures;
//   - Erase takes the same lock exclusively, inserts the record and commits.
//
// The exclusive lock waits for the writers in flight and holds new ones back until the record
// is committed; in READ COMMITTED a writer's statement after its lock takes its snapshot after
// the grant, so it sees the record. After Erase returns, no writer can add a row for the member,
// and the job deletes what is there. The lock is transaction-scoped, so a transaction pooler
// (PgBouncer in transaction mode) keeps it whole.
package erasure

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/notify"
)

// FenceSQL is the statement every writer naming a member runs first in its transaction (in a
// pgx.Batch, the batch's first statement: a batch is one implicit transaction). It takes the
// shared side of the erasure lock (playhead_erasure_fence, migration 00027, holds the key).
// The writer's next statements anti-join member_erasures (AntiJoin).
const FenceSQL = `SELECT playhead_erasure_fence()`

// AntiJoin is the condition a writer adds for the member column col of the rows it writes:
// true unless the member is erased. It is an index probe on member_erasures' primary key.
func AntiJoin(col string) string {
	return `NOT EXISTS (SELECT 1 FROM member_erasures e WHERE e.member_id = ` + col + `)`
}

// Fence queues FenceSQL in b, before the writes b queues next.
func Fence(b *pgx.Batch) { b.Queue(FenceSQL) }

// Channel carries an erased member's id to every node (a notification sent in the erasure's
// transaction): each drops the member's buffered positions, closes their event streams and
// refuses their tokens.
const Channel = "member_erased"

// KindErase is the job that deletes an erased member's data; its subject is the member id.
const KindErase = "member_erase"

// recordSQL records member $1 as erased, unless it is already, and deletes the provider's
// (issuer, subject) it was known by (member_subjects, package members): the record keeps only
// the pair's digest, with which a token of that subject issued before erased_at is refused
// while one issued after it maps to a new member. A digest, not the pair: the pair names the
// person at the provider, which the record must not keep; the digest only recognises a
// subject presented again. (It is pseudonymous, not anonymous: whoever holds a subject can
// compute its digest and find the record: docs/operations/personal-data.md.)
const recordSQL = `
WITH unlinked AS (
	DELETE FROM member_subjects WHERE member_id = $1 RETURNING playhead_subject_digest(issuer, subject) AS digest
)
INSERT INTO member_erasures (member_id, erased_at, subject_digest)
VALUES ($1, statement_timestamp(), (SELECT digest FROM unlinked))
ON CONFLICT (member_id) DO NOTHING`

// Erase records member as erased and enqueues the job that deletes their data, with
// maxAttempts attempts. It waits for the writers in flight (the exclusive side of the fence).
// An erasure of a member already erased changes nothing and returns created false: the job
// of the first one is (or was) enough, and it is idempotent.
func Erase(ctx context.Context, pool *pgxpool.Pool, member int64, maxAttempts int) (created bool, err error) {
	if member <= 0 {
		return false, errors.New("erase: member id must be positive")
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT playhead_erasure_lock()`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, recordSQL, member)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		created = true
		if _, err := jobqueue.Enqueue(ctx, tx, KindErase, member, maxAttempts); err != nil {
			return err
		}
		return notify.Send(ctx, tx, Channel, strconv.FormatInt(member, 10))
	})
	if err != nil {
		return false, fmt.Errorf("erase member %d: %w", member, err)
	}
	return created, nil
}

// TombstoneKeep is how long a forgotten item's tombstone (playback_forgotten) is kept
// (TombstoneKind prunes it after): a report made before the forget can wait in a buffer at
// most until its node stops, and in a spill file until that node starts again. A week covers a
// node that stays down over a long weekend; a report older than that which replays after its
// tombstone is gone brings the row back at its old position (docs/internals/write-behind.md).
const TombstoneKeep = 7 * 24 * time.Hour

// KindTombstones is the periodic job that deletes forgotten items' tombstones older than
// TombstoneKeep, every hour for the whole cluster.
const KindTombstones = "forgotten_prune"

// tombstoneBatch bounds the tombstones one transaction deletes.
const tombstoneBatch = 5_000

// pruneTombstonesSQL deletes up to $2 tombstones made before $1, found through
// playback_forgotten_at_idx.
const pruneTombstonesSQL = `DELETE FROM playback_forgotten WHERE (member_id, media_id) IN (
	SELECT member_id, media_id FROM playback_forgotten WHERE forgotten_at < $1 ORDER BY forgotten_at LIMIT $2)`

// sweepForgottenSQL deletes the rows that a forget deleted and a flush in flight brought back:
// a row whose report predates its item's tombstone, with its course progress. A flush whose
// statement took its snapshot before the forget committed inserts a row the forget's delete
// cannot see (it is not committed yet); the forget waits for such flushes and deletes again
// (playback.Store.Forget, WaitForWritersBefore), but only for a bounded time, and what a
// writer still running after that brings back is what this sweep finds.
// It takes the tombstones after the key ($1, $2) in key order, $3 of them (a bounded batch the
// planner probes playback's primary key for, where one join over every tombstone was a
// sequential scan of playback), and returns the batch's last key and size.
const sweepForgottenSQL = `
WITH batch AS (
	SELECT member_id, media_id, forgotten_at FROM playback_forgotten
	WHERE (member_id, media_id) > ($1, $2) ORDER BY member_id, media_id LIMIT $3
), gone AS (
	DELETE FROM playback p USING batch f
	WHERE p.member_id = f.member_id AND p.media_id = f.media_id AND p.event_time <= f.forgotten_at
	RETURNING p.member_id, p.media_id
), finished AS (
	DELETE FROM playback_last_finished l USING gone g WHERE l.member_id = g.member_id AND l.media_id = g.media_id
)
SELECT member_id, media_id, (SELECT count(*) FROM batch) FROM batch ORDER BY member_id DESC, media_id DESC LIMIT 1`

// sweepForgotten runs sweepForgottenSQL over every tombstone, tombstoneBatch a statement.
func sweepForgotten(ctx context.Context, pool *pgxpool.Pool) error {
	var member, media, n int64
	for {
		err := pool.QueryRow(ctx, sweepForgottenSQL, member, media, tombstoneBatch).Scan(&member, &media, &n)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sweep forgotten items: %w", err)
		}
		if n < tombstoneBatch {
			return nil
		}
	}
}

// TombstoneKind returns the kind KindTombstones: each run deletes the rows a flush racing a
// forget brought back (sweepForgottenSQL), then the tombstones made more than TombstoneKeep
// before its run time, tombstoneBatch a transaction. pool nil gives the kind without Run, for
// a node that runs no jobs.
func TombstoneKind(pool *pgxpool.Pool) jobqueue.Kind {
	schedule, _ := jobqueue.Every(time.Hour) // a whole number of seconds: never an error
	k := jobqueue.Kind{Name: KindTombstones, Periodic: &jobqueue.Periodic{Schedule: schedule, MaxAttempts: 3}}
	if pool != nil {
		k.Run = func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			before := jobqueue.RunTime(j).Add(-TombstoneKeep)
			if err := sweepForgotten(ctx, pool); err != nil {
				return jobqueue.Result{}, err
			}
			for {
				tag, err := pool.Exec(ctx, pruneTombstonesSQL, before, tombstoneBatch)
				if err != nil {
					return jobqueue.Result{}, fmt.Errorf("prune forgotten items' tombstones: %w", err)
				}
				if tag.RowsAffected() < tombstoneBatch {
					return jobqueue.Result{}, nil
				}
			}
		}
	}
	return k
}
