package playback_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/playhead/playhead/ratelimit"
)

// TestMarks_RateLimited: marks take tokens of the member's report limit, so toggling watched
// and unwatched (each mark watched after unwatched a new finish, announced) is bounded: past
// the burst, every mark form answers 429 with a JSON error and stores nothing; another member
// is not held back.
func TestMarks_RateLimited(t *testing.T) {
	t.Parallel()
	// One token per 1 000 s after a burst of 2: the third mark is refused, however slow the run.
	b := setup(t, options{limit: ratelimit.New(0.001, 2)})
	tok, other := token(t, 71, false), token(t, 72, false)
	id := b.createMedia(t, map[string]any{"title": "lesson", "duration_ms": 1_200_000, "status": "READY", "visibility": "PUBLIC"})
	path := fmt.Sprintf("/v1/playback/%d/watched", id)
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		if status, body := b.do(t, method, path, tok, nil); status != http.StatusNoContent {
			t.Fatalf("%s within the burst: %d %s", method, status, body)
		}
	}
	for _, req := range []struct{ method, path string }{
		{http.MethodPut, path}, {http.MethodDelete, path},
		{http.MethodPut, "/v1/collections/course/watched"}, {http.MethodDelete, "/v1/collections/course/watched"},
	} {
		status, body := b.do(t, req.method, req.path, tok, nil)
		if status != http.StatusTooManyRequests || !strings.Contains(string(body), `"error"`) {
			t.Errorf("%s %s past the burst: %d %s, want 429 with a JSON error", req.method, req.path, status, body)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 71 AND watched_at IS NOT NULL`); n != 0 {
		t.Errorf("the refused mark watched stored a watched mark (%d rows)", n)
	}
	if status, body := b.do(t, http.MethodPut, path, other, nil); status != http.StatusNoContent {
		t.Errorf("another member's mark: %d %s, want 204", status, body)
	}
}
