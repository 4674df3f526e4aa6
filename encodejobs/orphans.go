package encodejobs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/storage"
)

// orphanSweepLockKey is the advisory lock that lets one node at a time sweep orphans.
const orphanSweepLockKey = 0x706c6179_6f727068 // "playorph"

// OrphanRules are the storage folders the media pipeline writes, with what keeps each group
// of objects in use:
//
//   - hls/{media}/{claim}/ — an encode job's outputs. In use while a media row points at them
//     (its hls_key or thumbnail_key, whatever its status: an administrator's status change
//     must not destroy a video), while a rendition row of the media names the folder (an
//     encode group's rendition, kept while its media exists, playable or FAILED, until a new
//     encode of the media plans its ladder afresh), or while the claim that writes them is
//     running (a job of an encode kind PROCESSING with that claim token). A claim token is
//     never reused, so a group nothing holds now can never be needed again.
//   - hls/{media}/captions-{token}/ — a caption track's files (captions.Folder), beside the
//     encodes' folders and swept by the same rule. In use while a captions row names the
//     folder; the handler writes the files before the row, so a folder nothing names is what
//     a failed or killed upload left, or a deletion that could not remove its files.
//   - uploads/{upload}/ — an uploaded or imported source. In use while a media row's
//     source_key is {upload}/source, the one name both writers (the upload handler and the
//     import) give it.
//
// What is left is what a killed process wrote before it could record it or delete it.
func OrphanRules(pool *pgxpool.Pool) []storage.SweepRule {
	return []storage.SweepRule{
		{Prefix: "hls/", Depth: 2, InUse: func(ctx context.Context, groups []string) (map[string]bool, error) {
			ids, claims := make([]int64, len(groups)), make([]string, len(groups))
			for i, g := range groups {
				parts := strings.Split(g, "/") // hls, media, claim, ""
				ids[i], _ = strconv.ParseInt(parts[1], 10, 64)
				claims[i] = parts[2]
			}
			return inUse(ctx, pool, `
				SELECT g.prefix FROM unnest($1::text[], $2::bigint[], $3::text[]) AS g(prefix, media_id, claim)
				WHERE EXISTS (SELECT 1 FROM media m WHERE m.id = g.media_id
				              AND (starts_with(m.hls_key, g.prefix) OR starts_with(m.thumbnail_key, g.prefix)))
				   OR EXISTS (SELECT 1 FROM jobs j WHERE j.kind = ANY($4) AND j.subject_id = g.media_id
				              AND j.status = 'PROCESSING' AND j.claim_token::text = g.claim)
				   OR EXISTS (SELECT 1 FROM media_renditions r WHERE r.media_id = g.media_id AND r.folder = g.prefix)
				   OR EXISTS (SELECT 1 FROM captions c WHERE c.folder = g.prefix)`, groups, ids, claims, Kinds)
		}},
		{Prefix: "uploads/", Depth: 1, InUse: func(ctx context.Context, groups []string) (map[string]bool, error) {
			return inUse(ctx, pool, `
				SELECT g.prefix FROM unnest($1::text[]) AS g(prefix)
				WHERE EXISTS (SELECT 1 FROM media m WHERE m.source_key = g.prefix || 'source')`, groups)
		}},
	}
}

func inUse(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (map[string]bool, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("objects in use: %w", err)
	}
	defer rows.Close()
	used := map[string]bool{}
	for rows.Next() {
		var prefix string
		if err := rows.Scan(&prefix); err != nil {
			return nil, err
		}
		used[prefix] = true
	}
	return used, rows.Err()
}

// OrphanSweepLock is the sweep's Lock: a session advisory lock held on one pooled connection
// for the length of a pass, so that one node at a time lists the store.
func OrphanSweepLock(pool *pgxpool.Pool) func(ctx context.Context) (func(), bool, error) {
	return func(ctx context.Context) (func(), bool, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, false, err
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(orphanSweepLockKey)).Scan(&ok); err != nil || !ok {
			conn.Release()
			return nil, false, err
		}
		return func() {
			// Unlocked with a fresh context: the pass's may be cancelled. A connection that
			// cannot unlock is closed, which releases the lock with the session.
			unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1)`, int64(orphanSweepLockKey)); err != nil {
				_ = conn.Conn().Close(unlockCtx)
			}
			conn.Release()
		}, true, nil
	}
}
