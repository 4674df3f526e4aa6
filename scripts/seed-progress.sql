-- Data for the progress reads' load run (docs/benchmarks/, the progress-reads runs): one
-- collection of 500 lessons (25 chapters of 20), and for each of loadgen's players (members
-- :start … :start + :players - 1) lessons 1-200 watched and lesson 201 half way, reported over
-- the past hours. Every player's continue-watching list then walks 201 rows of which 200 are
-- finished (each asking for its up-next), the heavy case; its collection read joins 500 items
-- to 201 rows of its own.
--   psql "$DATABASE_URL" -v start=1000000 -v players=2000 -f scripts/seed-progress.sql
\set ON_ERROR_STOP on
INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING;
WITH imp AS (
	INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
	VALUES (1, 'seed-progress.sql', 500, 500, 0) RETURNING id),
lessons AS (
	INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
	SELECT 1, 'loadgen course lesson ' || g, 'READY', 'PUBLIC', 600000, 'hls/none/master.m3u8'
	FROM generate_series(1, 500) g RETURNING id)
INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
SELECT imp.id, n + 1, 'loadgen course', (n - 1) / 20 + 1, (n - 1) % 20 + 1, 'https://example.com/lesson.mp4', l.id
FROM imp, (SELECT id, row_number() OVER (ORDER BY id) AS n FROM lessons) l;

INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished)
SELECT member, l.media_id, CASE WHEN l.n <= 200 THEN 600000 ELSE 300000 END,
       statement_timestamp() - interval '1 minute' * (300 - l.n), statement_timestamp(),
       CASE WHEN l.n <= 200 THEN statement_timestamp() - interval '1 minute' * (300 - l.n) END, l.n <= 200
FROM generate_series(:start::bigint, :start::bigint + :players - 1) member,
     (SELECT media_id, row_number() OVER (ORDER BY chapter, position) AS n
      FROM import_rows WHERE collection = 'loadgen course') l
WHERE l.n <= 201;
-- What the flush keeps for such rows: each player's newest finished lesson of the collection.
INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
SELECT DISTINCT ON (p.member_id, r.collection) p.member_id, r.collection, p.media_id, p.event_time
FROM playback p JOIN import_rows r ON r.media_id = p.media_id
WHERE p.finished AND p.member_id >= :start::bigint
ORDER BY p.member_id, r.collection, p.event_time DESC, p.media_id DESC;
ANALYZE;
