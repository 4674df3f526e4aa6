package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pageRows is how many rows one page of a list reads: the most the export holds in memory at
// once, a megabyte or two whatever the member's history.
const pageRows = 500

// header is what the document says before its lists, read before the answer starts so that a
// database that does not answer is a 503, not a cut document.
type header struct {
	MemberID    int64      `json:"member_id"`
	ExportedAt  time.Time  `json:"exported_at"`
	MemberSince *time.Time `json:"member_since"`
	Identity    *identity  `json:"identity"`
	Settings    settings   `json:"settings"`
}

// identity is the identity provider's name for the member (member_subjects): nil for a member
// of the shared-secret mode, whose token's subject is the member id.
type identity struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// settings are the member's own settings (PUT /v1/me/settings).
type settings struct {
	HistoryPaused   bool       `json:"history_paused"`
	HistoryPausedAt *time.Time `json:"history_paused_at"`
}

// headerSQL reads the export's time, when the member's row was created (it exists once they
// own media, or from their first token of a provider), when they paused their history (NULL:
// not paused) and the provider's (issuer, subject) they are known by (NULL: none).
const headerSQL = `
SELECT statement_timestamp(),
       (SELECT created_at FROM members WHERE id = $1),
       (SELECT paused_at FROM history_paused WHERE member_id = $1),
       s.issuer, s.subject
FROM (SELECT 1) one LEFT JOIN member_subjects s ON s.member_id = $1`

// readHeader reads member's header.
func readHeader(ctx context.Context, pool *pgxpool.Pool, member int64) (header, error) {
	h := header{MemberID: member}
	var issuer, subject *string
	err := pool.QueryRow(ctx, headerSQL, member).Scan(&h.ExportedAt, &h.MemberSince, &h.Settings.HistoryPausedAt, &issuer, &subject)
	if issuer != nil && subject != nil {
		h.Identity = &identity{Issuer: *issuer, Subject: *subject}
	}
	h.ExportedAt = h.ExportedAt.UTC()
	h.MemberSince = utc(h.MemberSince)
	h.Settings.HistoryPausedAt = utc(h.Settings.HistoryPausedAt)
	h.Settings.HistoryPaused = h.Settings.HistoryPausedAt != nil
	return h, err
}

// Item is one history item: a playback row of the member, hidden ones too, with its media's
// title and the parts of it the member played.
type Item struct {
	MediaID    int64      `json:"media_id"`
	Title      string     `json:"title"`
	DurationMS *int64     `json:"duration_ms"`
	PositionMS int64      `json:"position_ms"`
	StartedAt  *time.Time `json:"started_at"`
	EventTime  time.Time  `json:"event_time"`
	UpdatedAt  time.Time  `json:"updated_at"`
	WatchedAt  *time.Time `json:"watched_at"`
	Finished   bool       `json:"finished"`
	Hidden     bool       `json:"hidden"`
	Collection *string    `json:"collection"`
	Watched    []Range    `json:"watched_ranges"`
}

// historySQL is a page of the member's history after media $2 (NULL: from the start), by
// media id: the primary key's order, which a position update does not change, so an item that
// is being watched while the export runs is neither skipped nor sent twice.
const historySQL = `
SELECT p.media_id, m.title, m.duration_ms, p.position_ms, p.started_at, p.event_time, p.updated_at,
       p.watched_at, p.finished, p.hidden, p.collection, p.watched
FROM playback p
JOIN media m ON m.id = p.media_id
WHERE p.member_id = $1 AND ($2::bigint IS NULL OR p.media_id > $2)
ORDER BY p.media_id
LIMIT $3`

func scanItem(row pgx.CollectableRow) (Item, error) {
	var it Item
	var watched pgtype.Bits
	if err := row.Scan(&it.MediaID, &it.Title, &it.DurationMS, &it.PositionMS, &it.StartedAt, &it.EventTime,
		&it.UpdatedAt, &it.WatchedAt, &it.Finished, &it.Hidden, &it.Collection, &watched); err != nil {
		return Item{}, err
	}
	var duration int64
	if it.DurationMS != nil {
		duration = *it.DurationMS
	}
	it.Watched = Ranges(watched, duration)
	it.StartedAt, it.WatchedAt = utc(it.StartedAt), utc(it.WatchedAt)
	it.EventTime, it.UpdatedAt = it.EventTime.UTC(), it.UpdatedAt.UTC()
	return it, nil
}

// eachItem calls f with every history item of member, a page at a time, and flush after each
// page.
func eachItem(ctx context.Context, pool *pgxpool.Pool, member int64, f func(Item) error, flush func() error) error {
	var after *int64
	for {
		items, err := readPage(ctx, pool, historySQL, []any{member, after, pageRows}, scanItem)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := f(it); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if len(items) < pageRows {
			return nil
		}
		after = &items[len(items)-1].MediaID
	}
}

// section is one list of the document besides the history: its JSON name and the statement
// that gives a page of it for $1 the member after the key $2 (NULL: from the start), $3 rows,
// each row its key as text and the element as JSON text. PostgreSQL writes the JSON
// (json_build_object), so the statement alone says what the list holds.
type section struct {
	name, sql string
}

// sections are the document's lists after the history, in order (the OpenAPI document's
// MemberExport describes them).
var sections = []section{
	{"collection_progress", `
SELECT collection, json_build_object('collection', collection, 'media_id', media_id, 'event_time', event_time)::text
FROM playback_last_finished WHERE member_id = $1 AND ($2::text IS NULL OR collection > $2)
ORDER BY collection LIMIT $3`},
	{"course_completions", `
SELECT collection || '/' || to_char(completed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS'),
       json_build_object('collection', collection, 'completed_at', completed_at)::text
FROM collection_completions WHERE member_id = $1
  AND ($2::text IS NULL OR collection || '/' || to_char(completed_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') > $2)
ORDER BY 1 LIMIT $3`},
	{"uploads", `
SELECT id::text, json_build_object('id', id, 'title', title, 'status', status, 'visibility', visibility,
       'duration_ms', duration_ms, 'failure_reason', failure_reason, 'created_at', created_at, 'updated_at', updated_at)::text
FROM media WHERE owner_id = $1 AND ($2::text IS NULL OR id > $2::bigint)
ORDER BY id LIMIT $3`},
	{"unfinished_uploads", `
SELECT id, json_build_object('id', id, 'title', title, 'visibility', visibility, 'upload_length', upload_length,
       'upload_offset', upload_offset, 'metadata', metadata, 'created_at', created_at, 'expires_at', expires_at)::text
FROM uploads WHERE owner_id = $1 AND media_id IS NULL AND ($2::text IS NULL OR id > $2)
ORDER BY id LIMIT $3`},
	{"captions", `
SELECT id::text, json_build_object('id', id, 'media_id', media_id, 'language', language, 'label', label, 'cues', cues,
       'created_at', created_at)::text
FROM captions WHERE created_by = $1 AND ($2::text IS NULL OR id > $2::bigint)
ORDER BY id LIMIT $3`},
	{"imports", `
SELECT id::text, json_build_object('id', id, 'filename', filename, 'sheet', sheet, 'total_rows', total_rows,
       'accepted', accepted, 'rejected', rejected, 'created_at', created_at)::text
FROM imports WHERE created_by = $1 AND ($2::text IS NULL OR id > $2::bigint)
ORDER BY id LIMIT $3`},
	// Without the secret: it signs deliveries and is shown once, at registration.
	{"webhook_endpoints", `
SELECT id::text, json_build_object('id', id, 'url', url, 'events', events, 'created_at', created_at)::text
FROM webhook_endpoints WHERE created_by = $1 AND ($2::text IS NULL OR id > $2::bigint)
ORDER BY id LIMIT $3`},
	{"events", `
SELECT id::text, json_build_object('id', id, 'media_id', media_id, 'kind', kind, 'payload', payload, 'created_at', created_at)::text
FROM notification_outbox WHERE member_id = $1 AND ($2::text IS NULL OR id > $2::bigint)
ORDER BY id LIMIT $3`},
}

// element is one row of a section: its key and its JSON.
type element struct {
	key string
	doc []byte
}

func scanElement(row pgx.CollectableRow) (element, error) {
	var e element
	err := row.Scan(&e.key, &e.doc)
	return e, err
}

// writeJSON writes the whole document to w: h, then the history and every section, each list
// a page at a time, flushing w after every page.
func writeJSON(ctx context.Context, pool *pgxpool.Pool, w *bufio.Writer, h header, flush func() error) error {
	head, err := json.Marshal(h)
	if err != nil {
		return err
	}
	w.Write(head[:len(head)-1]) // without its closing brace: the lists follow
	w.WriteString(`,"history":[`)
	first := true
	err = eachItem(ctx, pool, h.MemberID, func(it Item) error {
		b, err := json.Marshal(it)
		if err != nil {
			return err
		}
		if !first {
			w.WriteByte(',')
		}
		first = false
		_, err = w.Write(b)
		return err
	}, flush)
	if err != nil {
		return err
	}
	w.WriteByte(']')
	for _, s := range sections {
		w.WriteString(`,"` + s.name + `":[`)
		if err := writeSection(ctx, pool, w, s, h.MemberID, flush); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		w.WriteByte(']')
	}
	w.WriteString("}\n")
	return flush()
}

// writeSection writes the elements of s for member to w, comma-separated, a page at a time.
func writeSection(ctx context.Context, pool *pgxpool.Pool, w *bufio.Writer, s section, member int64, flush func() error) error {
	var after *string
	for n := 0; ; {
		page, err := readPage(ctx, pool, s.sql, []any{member, after, pageRows}, scanElement)
		if err != nil {
			return err
		}
		for _, e := range page {
			if n > 0 {
				w.WriteByte(',')
			}
			n++
			w.Write(e.doc)
		}
		if err := flush(); err != nil {
			return err
		}
		if len(page) < pageRows {
			return nil
		}
		after = &page[len(page)-1].key
	}
}

// readPage runs one page's query with args in a transaction of its own, read only, whose
// times PostgreSQL writes in UTC (the sections' JSON), and returns its rows. No transaction
// is held while the page is written to the client: a client that reads slowly holds back
// neither vacuum nor the pruning HOT updates need, and holds no connection between pages.
func readPage[T any](ctx context.Context, pool *pgxpool.Pool, query string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	return out, err
}

// utc is t in UTC, nil for nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
