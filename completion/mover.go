// Package completion announces members' completions: it moves the finishes the playback flush
// and the marks by hand record in playback_completions into the notification outbox, as
// playback.completed events, and adds a collection.completed event when a finish leaves every
// item of a collection finished. Webhooks and the event stream then send them like the media
// events.
//
// The flush writes playback_completions in the transaction of the finish (no finish without
// its row, no row without its finish), but it takes no member row lock, and a member's outbox
// rows must be written under that lock: the event stream reads a member's rows "after the
// last id it sent", which skips none only if ids grow in commit order among a member's rows.
// The Mover keeps that order: it writes the outbox rows in a transaction that holds the
// members' row locks, as the media pipeline's do, and deletes the completions it moved in the
// same transaction, so each is moved once.
package completion

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/lifecycle"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

// moverLockKey is the advisory lock that lets one node at a time move completions.
const moverLockKey = 0x706c6179_646f6e65 // "playdone"

// Config configures a Mover. Zero values take the defaults named on each field.
type Config struct {
	// Interval is how often the mover looks for completions (the flush sends no
	// notification). Default 1 s.
	Interval time.Duration
	// Batch is how many completions one transaction moves. Default 500.
	Batch int
	// Logger receives the mover's errors. Default slog.Default().
	Logger *slog.Logger
}

// Mover moves completions into the outbox.
type Mover struct {
	pool    *pgxpool.Pool
	cfg     Config
	batches lifecycle.Batches
}

// NewMover returns a Mover on pool. It does nothing until Start.
func NewMover(pool *pgxpool.Pool, cfg Config) *Mover {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.Batch = cmp.Or(cfg.Batch, 500)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Mover{pool: pool, cfg: cfg}
}

// Wake makes the mover run now.
func (m *Mover) Wake() { m.batches.Wake() }

// Start launches the mover's loop: batch after batch while there is a backlog, then at each
// Wake or Interval.
func (m *Mover) Start(ctx context.Context) error {
	return m.batches.Start(ctx, m.cfg.Interval, m.cfg.Batch, m.MoveOnce,
		func(err error) { m.cfg.Logger.Warn("completion mover failed", "err", err) }, nil)
}

// Stop ends the loop; a move in flight rolls back (its completions are moved by the next run,
// here or on another node).
func (m *Mover) Stop(ctx context.Context) error { return m.batches.Stop(ctx) }

// claimSQL deletes up to $1 completions, oldest first, and returns them, leaving those of
// erased members to the erasure job (their members row cannot be created again: the trigger
// of migration 00027 refuses it). The erasure fence, taken before, makes this statement see
// every erasure that committed.
var claimSQL = `
DELETE FROM playback_completions WHERE id = ANY(ARRAY(
	SELECT c.id FROM playback_completions c WHERE ` + erasure.AntiJoin("c.member_id") + `
	ORDER BY c.id LIMIT $1))
RETURNING member_id, media_id, finished_at, position_ms, duration_ms, how`

// lockMembersSQL locks the members' rows ($1, sorted), creating those that do not exist yet:
// a member who only watches has none, and a row lock of their own is what orders their outbox
// rows against a first upload's events. Rows are locked in id order, so two movers cannot
// deadlock, and before anything else, as in the pipeline (members → media → jobs).
const lockMembersSQL = `
WITH created AS (
	INSERT INTO members (id) SELECT unnest($1::bigint[]) ORDER BY 1 ON CONFLICT (id) DO NOTHING
)
SELECT id FROM members WHERE id = ANY($1) ORDER BY id FOR UPDATE`

// liveMediaSQL locks the rows of the media $1 that are not DELETED (FOR KEY SHARE, after the
// members' rows, as the pipeline orders its locks: members → media) and returns their ids. A
// finish of a media deleted since it was recorded is claimed but not announced: the deletion
// removes the media's events but media.deleted, and a playback.completed written after it
// would follow it. The lock holds a deletion back until the move commits (it takes the media
// row FOR UPDATE, then its job removes what the move wrote); a deletion that committed first
// is seen (READ COMMITTED rechecks a locked row's newest version).
const liveMediaSQL = `SELECT id FROM media WHERE id = ANY($1) AND status <> 'DELETED' ORDER BY id FOR KEY SHARE`

// playbackOutboxSQL writes one playback_completed outbox row per completion $1 … (the rows
// claimSQL returned, as arrays), in (member, finish) order. Collections are the collections
// the media is an item of now (collection_items, read through import_rows' media index).
const playbackOutboxSQL = `
INSERT INTO notification_outbox (member_id, media_id, kind, payload)
SELECT u.member_id, u.media_id, '` + media.OutboxPlaybackCompleted + `',
       jsonb_build_object('finished_at', u.finished_at, 'position_ms', u.position_ms,
                          'duration_ms', coalesce(u.duration_ms, 0), 'how', u.how,
                          'collections', coalesce((
                              SELECT jsonb_agg(DISTINCT ci.collection ORDER BY ci.collection)
                              FROM collection_items ci
                              WHERE ci.collection IN (SELECT r.collection FROM import_rows r WHERE r.media_id = u.media_id)
                                AND ci.media_id = u.media_id), '[]'::jsonb))
FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::text[])
     AS u(member_id, media_id, finished_at, position_ms, duration_ms, how)
ORDER BY u.member_id, u.finished_at, u.media_id`

// collectionOutboxSQL finds the collections the moved finishes ($1 members, $2 media) leave
// complete, and announces each completion once: a collection is complete when every current
// item is finished by the member, and its completion is the latest of those finishes
// (completed_at), recorded in collection_completions, so a second finish of the same round
// moved later finds it recorded. An item finished again after being unfinished (rewatched or
// unmarked) brings a later finish, so a new completion. media_id names the item whose finish
// completed it.
const collectionOutboxSQL = `
WITH pairs AS (
	SELECT DISTINCT u.member_id, r.collection
	FROM unnest($1::bigint[], $2::bigint[]) AS u(member_id, media_id)
	JOIN import_rows r ON r.media_id = u.media_id
), state AS (
	SELECT pr.member_id, pr.collection, count(*) AS items,
	       bool_and(coalesce(p.finished, false)) AS done, max(p.finished_at) AS completed_at,
	       (array_agg(ci.media_id ORDER BY p.finished_at DESC NULLS LAST, ci.media_id DESC))[1] AS last_media
	FROM pairs pr
	JOIN collection_items ci ON ci.collection = pr.collection
	LEFT JOIN playback p ON p.member_id = pr.member_id AND p.media_id = ci.media_id
	GROUP BY pr.member_id, pr.collection
), recorded AS (
	INSERT INTO collection_completions (member_id, collection, completed_at)
	SELECT member_id, collection, completed_at FROM state WHERE done AND completed_at IS NOT NULL
	ORDER BY member_id, collection
	ON CONFLICT DO NOTHING
	RETURNING member_id, collection, completed_at
)
INSERT INTO notification_outbox (member_id, media_id, kind, payload)
SELECT r.member_id, s.last_media, '` + media.OutboxCollectionCompleted + `',
       jsonb_build_object('collection_id', r.collection, 'items', s.items, 'completed_at', r.completed_at)
FROM recorded r JOIN state s ON s.member_id = r.member_id AND s.collection = r.collection
ORDER BY r.member_id, r.completed_at, r.collection`

// completions are claimed rows, as the arrays playbackOutboxSQL reads.
type completions struct {
	members, medias, positions []int64
	durations                  []*int64
	finished                   []time.Time
	how                        []string
}

// MoveOnce moves up to Batch completions in one transaction and returns how many it took
// (those of media deleted since are taken and not announced: liveMediaSQL). It does
// nothing (0) while another node holds the mover's lock. A node that dies in the middle rolls
// everything back: the completions stay, and are moved once by whoever runs next.
func (m *Mover) MoveOnce(ctx context.Context) (int, error) {
	moved := 0
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(moverLockKey)).Scan(&locked); err != nil || !locked {
			return err
		}
		if _, err := tx.Exec(ctx, erasure.FenceSQL); err != nil {
			return err
		}
		var c completions
		rows, err := tx.Query(ctx, claimSQL, m.cfg.Batch)
		if err != nil {
			return err
		}
		var (
			member, mediaID, position int64
			duration                  *int64
			finished                  time.Time
			how                       string
		)
		_, err = pgx.ForEachRow(rows, []any{&member, &mediaID, &finished, &position, &duration, &how}, func() error {
			c.members, c.medias, c.finished = append(c.members, member), append(c.medias, mediaID), append(c.finished, finished)
			c.positions, c.durations, c.how = append(c.positions, position), append(c.durations, duration), append(c.how, how)
			return nil
		})
		if err != nil || len(c.members) == 0 {
			return err
		}
		moved = len(c.members)
		members := slices.Sorted(slices.Values(c.members))
		members = slices.Compact(members)
		if _, err := tx.Exec(ctx, lockMembersSQL, members); err != nil {
			return fmt.Errorf("lock members: %w", err)
		}
		c, err = c.ofLiveMedia(ctx, tx)
		if err != nil || len(c.members) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, playbackOutboxSQL, c.members, c.medias, c.finished, c.positions, c.durations, c.how); err != nil {
			return fmt.Errorf("outbox playback completions: %w", err)
		}
		if _, err := tx.Exec(ctx, collectionOutboxSQL, c.members, c.medias); err != nil {
			return fmt.Errorf("outbox collection completions: %w", err)
		}
		return notifyMembers(ctx, tx, members)
	})
	if err != nil {
		return 0, fmt.Errorf("move completions: %w", err)
	}
	return moved, nil
}

// ofLiveMedia returns the completions of c whose media is not DELETED (liveMediaSQL), in
// their order.
func (c completions) ofLiveMedia(ctx context.Context, tx pgx.Tx) (completions, error) {
	rows, err := tx.Query(ctx, liveMediaSQL, slices.Compact(slices.Sorted(slices.Values(c.medias))))
	if err != nil {
		return completions{}, fmt.Errorf("lock media: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return completions{}, fmt.Errorf("lock media: %w", err)
	}
	var live completions
	for i, mediaID := range c.medias {
		if _, found := slices.BinarySearch(ids, mediaID); !found {
			continue
		}
		live.members, live.medias, live.finished = append(live.members, c.members[i]), append(live.medias, mediaID), append(live.finished, c.finished[i])
		live.positions, live.durations, live.how = append(live.positions, c.positions[i]), append(live.durations, c.durations[i]), append(live.how, c.how[i])
	}
	return live, nil
}

// notifyMembers sends each member's outbox notification: the event streams and the relays
// wake on commit.
func notifyMembers(ctx context.Context, tx pgx.Tx, members []int64) error {
	for _, member := range members {
		if err := notify.Send(ctx, tx, media.ChannelOutbox, strconv.FormatInt(member, 10)); err != nil {
			return err
		}
	}
	return nil
}
