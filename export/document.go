package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// fetchRows is how many rows one FETCH of a section's cursor reads: the most the export holds
// in memory at once, a few hundred kilobytes whatever the member's history.
const fetchRows = 500

// header is what the document says before its lists, read before the answer starts so that a
// database that does not answer is a 503, not a cut document.
type header struct {
	MemberID    int64      `json:"member_id"`
	ExportedAt  time.Time  `json:"exported_at"`
	MemberSince *time.Time `json:"member_since"`
	Settings    settings   `json:"settings"`
}

// settings are the member's own settings (PUT /v1/me/settings).
type settings struct {
	HistoryPaused   bool       `json:"history_paused"`
	HistoryPausedAt *time.Time `json:"history_paused_at"`
}

// readHeader reads member's header in tx.
func readHeader(ctx context.Context, tx pgx.Tx, member int64) (header, error) {
	h := header{MemberID: member}
	err := tx.QueryRow(ctx, headerSQL, member).Scan(&h.ExportedAt, &h.MemberSince, &h.Settings.HistoryPausedAt)
	h.ExportedAt = h.ExportedAt.UTC()
	h.Settings.HistoryPaused = h.Settings.HistoryPausedAt != nil
	return h, err
}

// headerSQL reads the export's time (the transaction's), when the member's row was created
// (it exists once they own media) and when they paused their history (NULL: not paused).
const headerSQL = `
SELECT statement_timestamp(),
       (SELECT created_at FROM members WHERE id = $1),
       (SELECT paused_at FROM history_paused WHERE member_id = $1)`

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

// historySQL is the member's history, most recently watched first.
const historySQL = `
SELECT p.media_id, m.title, m.duration_ms, p.position_ms, p.started_at, p.event_time, p.updated_at,
       p.watched_at, p.finished, p.hidden, p.collection, p.watched
FROM playback p
JOIN media m ON m.id = p.media_id
WHERE p.member_id = $1
ORDER BY p.event_time DESC, p.media_id`

// eachItem calls f with every history item of member, read FETCH by FETCH, and flush after
// each one.
func eachItem(ctx context.Context, tx pgx.Tx, member int64, f func(Item) error, flush func() error) error {
	return eachRow(ctx, tx, "export_history", historySQL, member, func(rows pgx.Rows) error {
		var it Item
		var watched pgtype.Bits
		if err := rows.Scan(&it.MediaID, &it.Title, &it.DurationMS, &it.PositionMS, &it.StartedAt, &it.EventTime,
			&it.UpdatedAt, &it.WatchedAt, &it.Finished, &it.Hidden, &it.Collection, &watched); err != nil {
			return err
		}
		var duration int64
		if it.DurationMS != nil {
			duration = *it.DurationMS
		}
		it.Watched = Ranges(watched, duration)
		return f(it)
	}, flush)
}

// section is one list of the document besides the history: its JSON name and the statement
// that gives each of its elements as one JSON text, for $1 the member. PostgreSQL writes the
// JSON (json_build_object), so the statement alone says what the list holds.
type section struct {
	name, cursor, sql string
}

// sections are the document's lists after the history, in order (the OpenAPI document's
// MemberExport describes them).
var sections = []section{
	{"collection_progress", "export_progress", `
SELECT json_build_object('collection', collection, 'media_id', media_id, 'event_time', event_time)::text
FROM playback_last_finished WHERE member_id = $1 ORDER BY collection`},
	{"uploads", "export_uploads", `
SELECT json_build_object('id', id, 'title', title, 'status', status, 'visibility', visibility,
       'duration_ms', duration_ms, 'failure_reason', failure_reason, 'created_at', created_at, 'updated_at', updated_at)::text
FROM media WHERE owner_id = $1 ORDER BY id`},
	{"unfinished_uploads", "export_tus", `
SELECT json_build_object('id', id, 'title', title, 'visibility', visibility, 'upload_length', upload_length,
       'upload_offset', upload_offset, 'metadata', metadata, 'created_at', created_at, 'expires_at', expires_at)::text
FROM uploads WHERE owner_id = $1 AND media_id IS NULL ORDER BY created_at, id`},
	{"captions", "export_captions", `
SELECT json_build_object('id', id, 'media_id', media_id, 'language', language, 'label', label, 'cues', cues,
       'created_at', created_at)::text
FROM captions WHERE created_by = $1 ORDER BY id`},
	{"imports", "export_imports", `
SELECT json_build_object('id', id, 'filename', filename, 'sheet', sheet, 'total_rows', total_rows,
       'accepted', accepted, 'rejected', rejected, 'created_at', created_at)::text
FROM imports WHERE created_by = $1 ORDER BY id`},
	// Without the secret: it signs deliveries and is shown once, at registration.
	{"webhook_endpoints", "export_webhooks", `
SELECT json_build_object('id', id, 'url', url, 'events', events, 'created_at', created_at)::text
FROM webhook_endpoints WHERE created_by = $1 ORDER BY id`},
	{"events", "export_events", `
SELECT json_build_object('id', id, 'media_id', media_id, 'kind', kind, 'payload', payload, 'created_at', created_at)::text
FROM notification_outbox WHERE member_id = $1 ORDER BY id`},
}

// writeJSON writes the whole document to w: h, then the history and every section, each list
// as its cursor gives it, flushing w after every FETCH.
func writeJSON(ctx context.Context, tx pgx.Tx, w *bufio.Writer, h header, flush func() error) error {
	head, err := json.Marshal(h)
	if err != nil {
		return err
	}
	w.Write(head[:len(head)-1]) // without its closing brace: the lists follow
	w.WriteString(`,"history":[`)
	first := true
	err = eachItem(ctx, tx, h.MemberID, func(it Item) error {
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
		first := true
		err := eachRow(ctx, tx, s.cursor, s.sql, h.MemberID, func(rows pgx.Rows) error {
			var doc []byte
			if err := rows.Scan(&doc); err != nil {
				return err
			}
			if !first {
				w.WriteByte(',')
			}
			first = false
			_, err := w.Write(doc)
			return err
		}, flush)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		w.WriteByte(']')
	}
	w.WriteString("}\n")
	return flush()
}

// eachRow declares cursor over query (for $1 member) in tx, calls f for each row, FETCH by
// FETCH, and flush after each FETCH: the rows are read as the answer is written, and a
// client that reads slowly holds one FETCH in memory, not the list.
func eachRow(ctx context.Context, tx pgx.Tx, cursor, query string, member int64, f func(pgx.Rows) error, flush func() error) error {
	// cursor is a constant of this package, never input.
	if _, err := tx.Exec(ctx, "DECLARE "+cursor+" NO SCROLL CURSOR FOR "+query, member); err != nil {
		return err
	}
	fetch := "FETCH " + strconv.Itoa(fetchRows) + " FROM " + cursor
	for {
		rows, err := tx.Query(ctx, fetch)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			n++
			if err := f(rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		if n < fetchRows {
			break
		}
	}
	_, err := tx.Exec(ctx, "CLOSE "+cursor)
	return err
}
