package export_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/playhead/playhead/export"
)

// TestExport_NodeLimitAndItsRelease: with export.MaxRunning exports of other members still
// streaming, a further member's is 429 with Retry-After, and is served once one of them is
// closed by its client; an export refused by a failing database (its header unreadable)
// frees its place at once, so the member's next one is served rather than 429 for ever.
func TestExport_NodeLimitAndItsRelease(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	streaming := []int64{1}
	for m := int64(3); len(streaming) < export.MaxRunning; m++ {
		b.exec(t, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at)
			SELECT $1::bigint, media_id, position_ms, event_time, updated_at FROM playback WHERE member_id = 1`, m)
		streaming = append(streaming, m)
	}
	var open []*http.Response
	for _, m := range streaming { // each about 30 MB: still streaming while its client reads nothing
		resp := b.get(t, m, "")
		if resp.StatusCode != 200 {
			t.Fatalf("export of member %d: %d", m, resp.StatusCode)
		}
		open = append(open, resp)
	}
	refused := b.get(t, 2, "")
	io.Copy(io.Discard, refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusTooManyRequests || refused.Header.Get("Retry-After") == "" {
		t.Errorf("an export past the node's %d: %d, Retry-After %q; want 429 with it", export.MaxRunning, refused.StatusCode, refused.Header.Get("Retry-After"))
	}
	open[0].Body.Close() // the client goes: its stream ends on a failed write and frees its place
	for {
		resp := b.get(t, 2, "")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("member 2's export once a place is free: %d", resp.StatusCode)
		}
	}
	for _, resp := range open[1:] {
		resp.Body.Close()
	}

	b.exec(t, `ALTER TABLE history_paused RENAME TO history_paused_away`)
	failed := b.get(t, 2, "")
	for failed.StatusCode == http.StatusTooManyRequests { // member 2's last stream still ending
		failed.Body.Close()
		failed = b.get(t, 2, "")
	}
	io.Copy(io.Discard, failed.Body)
	failed.Body.Close()
	if failed.StatusCode < 500 {
		t.Fatalf("an export whose header cannot be read: %d, want a 5xx", failed.StatusCode)
	}
	b.exec(t, `ALTER TABLE history_paused_away RENAME TO history_paused`)
	for {
		resp := b.get(t, 2, "")
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		// A 429 for the node's limit is the other streams still ending; one that says an
		// export of member 2 is being sent is the refused export's place, held.
		if resp.StatusCode != http.StatusTooManyRequests || strings.Contains(string(raw), "of yours") {
			t.Fatalf("member 2's export after one refused by the database: %d %s", resp.StatusCode, raw)
		}
	}
}

// TestExport_AStalledClientHoldsNoConnection: while the client of a large export reads
// nothing (the stream blocked on a full socket), the export holds none of the pool's
// connections and no session of its database is in a transaction: a slow client holds back
// neither other requests nor vacuum. (Were either held, the wait below never ends.)
func TestExport_AStalledClientHoldsNoConnection(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	for _, query := range []string{"", "?format=csv"} {
		resp := b.get(t, 1, query)                          // 30 MB: the client reads its first bytes, then nothing
		for resp.StatusCode == http.StatusTooManyRequests { // the JSON's stream still ending
			resp.Body.Close()
			resp = b.get(t, 1, query)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("export%s: %d", query, resp.StatusCode)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		for {
			var inTransaction int
			if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTransaction); err != nil {
				t.Fatal(err)
			}
			if inTransaction == 0 && b.pool.Stat().AcquiredConns() == 0 {
				break
			}
		}
		resp.Body.Close()
	}
}
