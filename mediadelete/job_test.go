package mediadelete_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/internal/metrictest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// TestDeleteJob_RemovesEveryObjectAndRowOfTheMediaAndNothingElse deletes a media that has
// everything a media can have (objects under two claims, captions, a source, a resumable
// upload's bytes and unfinished write, 2 500 positions, a finished-lesson row, an import row,
// audience rows, jobs in every state, an event delivered to a webhook) beside another media of
// the same owner that has the same, and checks that the media is missing at once and that its
// deletion job leaves nothing of it, and all of the other, on local storage and on S3.
func TestDeleteJob_RemovesEveryObjectAndRowOfTheMediaAndNothingElse(t *testing.T) {
	for name, open := range s3test.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, _ := pgtest.Pool(t)
			st := open(t)
			parts := st.(storage.Parts)
			store := media.NewStore(pool)
			exec(t, pool, `INSERT INTO members (id) SELECT g FROM generate_series(1, 3500) g`)
			var victim, other int64
			for _, p := range []struct {
				id     *int64
				upload string
			}{{&victim, "up1"}, {&other, "up2"}} {
				if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility, source_key, duration_ms)
					VALUES (3, 'lesson', 'READY', 'PUBLIC', $1, 60000) RETURNING id`, "uploads/"+p.upload+"/source").Scan(p.id); err != nil {
					t.Fatal(err)
				}
			}
			objects := func(id int64, upload, tusID string) []string {
				h := fmt.Sprintf("hls/%d/", id)
				return []string{h + "claimA/v0/seg0.m4s", h + "claimA/thumb.jpg", h + "claimA/v0/iframes.m3u8",
					h + "claimB/v1/index.m3u8", h + "captions-tok/en/index.vtt", h + "claimB/storyboard/sprite_000.jpg",
					"uploads/" + upload + "/source", "tus/" + tusID + "/source", "tus/" + tusID + "/tails/0/piece"}
			}
			for _, k := range append(objects(victim, "up1", "t1"), objects(other, "up2", "t2")...) {
				if _, err := st.Put(ctx, k, strings.NewReader("bytes of "+k)); err != nil {
					t.Fatal(err)
				}
			}
			// Each resumable upload has a write of parts still open (a part stored after
			// its finish).
			partsIDs := map[string]string{}
			for _, tusID := range []string{"t1", "t2"} {
				id, err := parts.StartParts(ctx, "tus/"+tusID+"/source")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := parts.PutPart(ctx, "tus/"+tusID+"/source", id, 1, strings.NewReader("late part"), 9); err != nil {
					t.Fatal(err)
				}
				partsIDs[tusID] = id
			}
			for _, m := range []struct {
				id           int64
				tusID, label string
				chapterPos   int
			}{{victim, "t1", "en", 1}, {other, "t2", "en", 2}} {
				exec(t, pool, `UPDATE media SET hls_key = $2, thumbnail_key = $3 WHERE id = $1`, m.id,
					media.AssembledMaster(m.id), fmt.Sprintf("hls/%d/claimA/thumb.jpg", m.id))
				exec(t, pool, `INSERT INTO uploads (id, owner_id, upload_length, upload_offset, metadata, title, visibility, source_key, parts_id, media_id, expires_at)
					VALUES ($1, 3, 10, 10, '{}', 'lesson', 'PUBLIC', $2, $3, $4, now() + interval '1 day')`,
					m.tusID, "tus/"+m.tusID+"/source", partsIDs[m.tusID], m.id)
				exec(t, pool, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
					SELECT g, $1::bigint, 1000, now(), now() FROM generate_series(1000, CASE WHEN $1::bigint = $2::bigint THEN 3499 ELSE 1002 END) g`, m.id, victim)
				exec(t, pool, `INSERT INTO playback_last_finished (member_id, collection, media_id, event_time) VALUES (1000 + $2, 'course', $1, now())`, m.id, m.chapterPos)
				exec(t, pool, `INSERT INTO captions (media_id, language, label, folder, cues, created_by) VALUES ($1, 'en', 'English', $2, 1, 3)`,
					m.id, fmt.Sprintf("hls/%d/captions-tok/", m.id))
				exec(t, pool, `INSERT INTO media_renditions (media_id, name, folder, part) VALUES ($1, 'v0', $2, '{}')`, m.id, fmt.Sprintf("hls/%d/claimA/", m.id))
				exec(t, pool, `INSERT INTO media_audience (media_id, views, viewers, finished, watched_buckets, retention, computed_at)
					VALUES ($1, 1, 1, 1, 1, array_fill(0::bigint, ARRAY[100]), now())`, m.id)
				exec(t, pool, `INSERT INTO audience_dirty (media_id) VALUES ($1)`, m.id)
				// An encode group: the probe done, a rendition running elsewhere and gone
				// (lease expired), one not started, the finish waiting for both.
				exec(t, pool, `WITH probe AS (INSERT INTO jobs (kind, subject_id, status, completed_at) VALUES ('encode', $1, 'COMPLETED', now()) RETURNING id),
					r1 AS (INSERT INTO jobs (kind, subject_id, status, claim_token, lease_until, attempt_count) VALUES ('encode_rendition', $1, 'PROCESSING', gen_random_uuid(), now() - interval '1 minute', 1) RETURNING id),
					r2 AS (INSERT INTO jobs (kind, subject_id, status) VALUES ('encode_rendition', $1, 'PENDING') RETURNING id),
					fin AS (INSERT INTO jobs (kind, subject_id, status, waiting_on) VALUES ('encode_finish', $1, 'WAITING', 2) RETURNING id)
					INSERT INTO job_dependencies (parent_id, job_id) SELECT r.id, fin.id FROM fin, (SELECT id FROM r1 UNION ALL SELECT id FROM r2) r`, m.id)
			}
			exec(t, pool, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (3, 'course.csv', 2, 2, 0)`)
			exec(t, pool, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
				SELECT (SELECT max(id) FROM imports), n, 'course', 1, n, 'https://example.com/' || n, m
				FROM unnest(ARRAY[1, 2], ARRAY[$1::bigint, $2::bigint]) AS r(n, m)`, victim, other)
			var endpoint int64
			if err := pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (url, events, secret, created_by) VALUES ('https://hooks.example.com', '{media.ready}', 'k', 3) RETURNING id`).Scan(&endpoint); err != nil {
				t.Fatal(err)
			}
			for _, id := range []int64{victim, other} {
				exec(t, pool, `WITH o AS (INSERT INTO notification_outbox (member_id, media_id, kind, relayed_at) VALUES (3, $1, 'media_ready', now()) RETURNING id, created_at)
					INSERT INTO webhook_deliveries (endpoint_id, outbox_id, media_id, status, job_id, event_at) SELECT $2, o.id, $1, 'DELIVERED', 1, o.created_at FROM o`, id, endpoint)
			}
			snapshot := func(id int64) map[string]int {
				n := map[string]int{}
				for table, sql := range map[string]string{
					"playback":               `SELECT count(*) FROM playback WHERE media_id = $1`,
					"playback_last_finished": `SELECT count(*) FROM playback_last_finished WHERE media_id = $1`,
					"import_rows":            `SELECT count(*) FROM import_rows WHERE media_id = $1`,
					"captions":               `SELECT count(*) FROM captions WHERE media_id = $1`,
					"media_renditions":       `SELECT count(*) FROM media_renditions WHERE media_id = $1`,
					"media_audience":         `SELECT count(*) FROM media_audience WHERE media_id = $1`,
					"audience_dirty":         `SELECT count(*) FROM audience_dirty WHERE media_id = $1`,
					"uploads":                `SELECT count(*) FROM uploads WHERE media_id = $1`,
					"jobs":                   `SELECT count(*) FROM jobs WHERE subject_id = $1 AND kind <> 'media_delete'`,
					"job_dependencies":       `SELECT count(*) FROM job_dependencies d JOIN jobs j ON j.id = d.job_id WHERE j.subject_id = $1`,
					"webhook_deliveries":     `SELECT count(*) FROM webhook_deliveries WHERE media_id = $1`,
					"notification_outbox":    `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind <> 'media_deleted'`,
					"media":                  `SELECT count(*) FROM media WHERE id = $1`,
				} {
					n[table] = count(t, pool, sql, id)
				}
				return n
			}
			otherBefore := snapshot(other)

			if err := deleteMedia(ctx, pool, victim); err != nil {
				t.Fatal(err)
			}
			// Missing at once, for every read.
			if _, err := store.Get(ctx, victim); apperr.CodeOf(err) != apperr.NotFound {
				t.Errorf("Get of a deleted media: %v, want not found", err)
			}
			if _, found, err := store.LookupAccess(ctx, victim); err != nil || found {
				t.Errorf("LookupAccess of a deleted media: found %v, %v", found, err)
			}
			owned, _, err := store.ListOwned(ctx, 3, nil, 10)
			if err != nil || len(owned) != 1 || owned[0].ID != other {
				t.Errorf("the owner's list after the deletion: %+v, %v; want only media %d", owned, err, other)
			}
			if err := deleteMedia(ctx, pool, victim); apperr.CodeOf(err) != apperr.NotFound {
				t.Errorf("a second deletion: %v, want not found", err)
			}
			if n := count(t, pool, `SELECT count(*) FROM jobs WHERE subject_id = $1 AND status IN ('PENDING', 'WAITING')`, victim); n != 1 {
				t.Errorf("%d jobs of the deleted media pending or waiting, want 1 (its deletion)", n)
			}

			victimPrefixes := []string{fmt.Sprintf("hls/%d/", victim), "uploads/up1/", "tus/t1/"}
			// What List shows: the objects, and on Local the part stored beside the source.
			victimObjects := under(keys(t, st), victimPrefixes...)
			if len(victimObjects) < len(objects(victim, "up1", "t1")) {
				t.Fatalf("the deleted media's objects before its job: %q", victimObjects)
			}
			reg := prometheus.NewRegistry()
			startDeletions(t, pool, st, reg)
			deletionDone(t, pool, victim)

			all := keys(t, st)
			if left := under(all, victimPrefixes...); len(left) > 0 {
				t.Errorf("objects of the deleted media left: %q", left)
			}
			for _, k := range objects(other, "up2", "t2") {
				if !slices.Contains(all, k) {
					t.Errorf("object %s of the other media was removed", k)
				}
			}
			if u, ok := st.(storage.UnfinishedWrites); ok {
				for w, err := range u.Unfinished(ctx, "tus/", time.Now().Add(time.Hour)) {
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasPrefix(w.Key, "tus/t1/") {
						t.Errorf("the deleted media's upload still has an unfinished write: %+v", w)
					}
				}
			}
			for table, n := range snapshot(victim) {
				if n != 0 {
					t.Errorf("%s: %d rows of the deleted media left", table, n)
				}
			}
			if got := snapshot(other); fmt.Sprint(got) != fmt.Sprint(otherBefore) {
				t.Errorf("the other media's rows changed:\n got %v\nwant %v", got, otherBefore)
			}
			if n := count(t, pool, `SELECT count(*) FROM import_rows WHERE media_id IS NULL AND media_deleted_at IS NOT NULL AND position = 1`); n != 1 {
				t.Errorf("the deleted media's import row: %d rows unlinked with a deletion time, want 1", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND kind = 'media_deleted'`, victim); n != 1 {
				t.Errorf("%d media.deleted events, want 1", n)
			}
			if got := metrictest.Counter(t, reg, "playhead_media_deletions_total"); got != 1 {
				t.Errorf("deletions counted: %v, want 1", got)
			}
			if got := metrictest.Counter(t, reg, "playhead_media_deleted_objects_total"); got != float64(len(victimObjects)) {
				t.Errorf("objects removed counted: %v, want %d", got, len(victimObjects))
			}
		})
	}
}

// TestDelete_MissingOrAnotherMembersMediaIsNotFound: the owner's route cannot tell another
// member's media from a missing one, and a deletion of a missing media changes nothing.
func TestDelete_MissingMediaIsNotFound(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	err := deleteMedia(context.Background(), pool, 12345)
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.NotFound {
		t.Fatalf("deleting a missing media: %v, want not found", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs enqueued for a missing media", n)
	}
}
