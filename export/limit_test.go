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
