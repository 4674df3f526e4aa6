package playback_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A report's quality is counted for its media only when the whole report is accepted: a
// position past the end, a media the member may not play or a quality field out of bounds
// leaves neither a position nor a count behind. An old client's report, without quality,
// counts nothing.
func TestPlayback_PutQualityIsCountedOnlyWithItsReport(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 60_000})
	private := b.createMedia(t, map[string]any{"title": "private", "duration_ms": 60_000, "visibility": "PRIVATE", "owner_id": 99})
	tok := token(t, 42, false)
	put := func(mediaID int64, body string) (int, string) {
		status, resp := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", mediaID), tok, body)
		return status, string(resp)
	}
	for _, tc := range []struct {
		media  int64
		body   string
		status int
	}{
		{id, `{"position_ms": 5000, "quality": {"startup_ms": 700, "played_ms": 4000, "rendition_height": 720}}`, 204},
		{id, `{"position_ms": 9000, "quality": {"played_ms": 3000, "rebuffer_count": 1, "rebuffer_ms": 1000, "rendition_height": 720}}`, 204},
		{id, `{"position_ms": 10000}`, 204},
		{id, `{"position_ms": 60001, "quality": {"rebuffer_count": 50}}`, 422},
		{id, `{"position_ms": 11000, "quality": {"rebuffer_count": 50, "rebuffer_ms": -5}}`, 422},
		{id, `{"position_ms": 11000, "quality": {"rebuffer_count": 50, "error": "boom"}}`, 422},
		{private, `{"position_ms": 1000, "quality": {"rebuffer_count": 50}}`, 404},
	} {
		if status, resp := put(tc.media, tc.body); status != tc.status {
			t.Errorf("PUT %s: %d %s; want %d", tc.body, status, resp, tc.status)
		} else if status != 204 && !strings.Contains(resp, `"error"`) {
			t.Errorf("PUT %s: %s; want a JSON error", tc.body, resp)
		}
	}
	if err := b.quality.Write(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.flushNow(t)
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 42 AND media_id = $1 AND position_ms = 10000`, id); n != 1 {
		t.Errorf("the refused reports changed the stored position (rows at 10 000: %d)", n)
	}
	for metric, want := range map[string]int{"sessions": 1, "startup": 1, "played_ms": 7000, "rebuffers": 1, "rebuffer_ms": 1000} {
		if n := b.count(t, `SELECT coalesce(sum(value), 0) FROM media_quality WHERE media_id = $1 AND metric = $2`, id, metric); n != want {
			t.Errorf("%s = %d, want %d", metric, n, want)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM media_quality WHERE media_id = $1 OR metric = 'errors'`, private); n != 0 {
		t.Errorf("refused reports left %d counters", n)
	}
}

// A report refused because the node is stopping (503) is sent again by its player, quality
// included, to another node: its quality is not counted here, or it would count twice.
func TestPlayback_PutQualityOfARefusedReportIsNotCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 60_000})
	tok := token(t, 42, false)
	path := fmt.Sprintf("/v1/playback/%d", id)
	if status, resp := b.do(t, http.MethodPut, path, tok, `{"position_ms": 5000, "quality": {"rebuffer_count": 1}}`); status != 204 {
		t.Fatalf("PUT: %d %s", status, resp)
	}
	if err := b.buf.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status, resp := b.do(t, http.MethodPut, path, tok, `{"position_ms": 9000, "quality": {"rebuffer_count": 50}}`); status != 503 {
		t.Fatalf("PUT while stopping: %d %s; want 503", status, resp)
	}
	if err := b.quality.Write(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT coalesce(sum(value), 0) FROM media_quality WHERE media_id = $1 AND metric = 'rebuffers'`, id); n != 1 {
		t.Errorf("rebuffers = %d, want 1 (the refused report's 50 not counted)", n)
	}
}

// In sync mode a report whose write fails (a 5xx: its player sends it again) counts no quality
// either. The write fails by a trigger refusing member 43's rows.
func TestPlayback_PutQualityOfAFailedSyncWriteIsNotCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, options{sync: true})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 60_000})
	if _, err := b.pool.Exec(t.Context(), `
		CREATE FUNCTION refuse_43() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
		CREATE TRIGGER refuse_43 BEFORE INSERT OR UPDATE ON playback FOR EACH ROW WHEN (NEW.member_id = 43) EXECUTE FUNCTION refuse_43()`); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/v1/playback/%d", id)
	if status, resp := b.do(t, http.MethodPut, path, token(t, 42, false), `{"position_ms": 5000, "quality": {"rebuffer_count": 1}}`); status != 204 {
		t.Fatalf("PUT: %d %s", status, resp)
	}
	if status, resp := b.do(t, http.MethodPut, path, token(t, 43, false), `{"position_ms": 5000, "quality": {"rebuffer_count": 50}}`); status < 500 {
		t.Fatalf("PUT of a refused write: %d %s; want a 5xx", status, resp)
	}
	if err := b.quality.Write(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT coalesce(sum(value), 0) FROM media_quality WHERE media_id = $1 AND metric = 'rebuffers'`, id); n != 1 {
		t.Errorf("rebuffers = %d, want 1 (the failed write's 50 not counted)", n)
	}
}
