package playback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/ratelimit"
)

type positionBody struct {
	MediaID    int64     `json:"media_id"`
	PositionMS int32     `json:"position_ms"`
	EventTime  time.Time `json:"event_time"`
}

func TestPlayback_PutThenGet(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	tok := token(t, 42, false)

	status, body := b.do(t, http.MethodPost, fmt.Sprintf("/v1/playback/%d", id), tok, nil)
	if status != http.StatusOK {
		t.Fatalf("POST: %d %s", status, body)
	}
	for _, pos := range []int{5000, 10000, 15000} {
		if status, body := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, map[string]any{"position_ms": pos}); status != http.StatusNoContent {
			t.Fatalf("PUT %d: %d %s", pos, status, body)
		}
	}
	// Before any flush, this node's pending value wins over the database's 0.
	status, body = b.do(t, http.MethodGet, fmt.Sprintf("/v1/playback/%d", id), tok, nil)
	var got positionBody
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || got.PositionMS != 15000 {
		t.Fatalf("GET before flush: %d %s", status, body)
	}
	b.flushNow(t)
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 42 AND media_id = $1 AND position_ms = 15000`, id); n != 1 {
		t.Fatalf("stored rows with the newest position = %d, want 1", n)
	}
	// Reopening resumes from the stored position.
	status, body = b.do(t, http.MethodPost, fmt.Sprintf("/v1/playback/%d", id), tok, nil)
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || got.PositionMS != 15000 {
		t.Fatalf("POST after flush: %d %s", status, body)
	}
}

func TestPlayback_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	public := b.createMedia(t, map[string]any{"title": "public", "duration_ms": 60_000})
	private := b.createMedia(t, map[string]any{"title": "private", "duration_ms": 60_000, "visibility": "PRIVATE", "owner_id": 99})
	noDuration := b.createMedia(t, map[string]any{"title": "live"})
	processing := b.createMedia(t, map[string]any{"title": "encoding", "status": "PROCESSING"})
	member := token(t, 7, false)
	path := func(id int64) string { return fmt.Sprintf("/v1/playback/%d", id) }

	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "7", "exp": time.Now().Add(-time.Minute).Unix()}).SignedString(secret)
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "7"}).SignedString(secret)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "7", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("another-secret-another-secret-another"))
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "7", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "7", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	badSubject, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)

	cases := []struct {
		name   string
		method string
		path   string
		token  string
		body   any
		status int
	}{
		{"MalformedJSON", http.MethodPut, path(public), member, `{"position_ms": 1`, 400},
		{"NotAnObject", http.MethodPut, path(public), member, `[1,2]`, 400},
		{"EmptyBody", http.MethodPut, path(public), member, ``, 400},
		{"TrailingData", http.MethodPut, path(public), member, `{"position_ms": 1} {}`, 400},
		{"MissingPosition", http.MethodPut, path(public), member, `{}`, 422},
		{"NullPosition", http.MethodPut, path(public), member, `{"position_ms": null}`, 422},
		{"NegativePosition", http.MethodPut, path(public), member, `{"position_ms": -1}`, 422},
		{"FractionalPosition", http.MethodPut, path(public), member, `{"position_ms": 1.5}`, 422},
		{"StringPosition", http.MethodPut, path(public), member, `{"position_ms": "1000"}`, 422},
		{"OverDuration", http.MethodPut, path(public), member, `{"position_ms": 60001}`, 422},
		{"Over24hWithoutDuration", http.MethodPut, path(noDuration), member, `{"position_ms": 86400001}`, 422},
		{"NonNumericMediaID", http.MethodPut, "/v1/playback/abc", member, `{"position_ms": 1}`, 400},
		{"ZeroMediaID", http.MethodPut, "/v1/playback/0", member, `{"position_ms": 1}`, 400},
		{"UnknownMediaID", http.MethodPut, path(987654), member, `{"position_ms": 1}`, 404},
		{"NotReadyMedia", http.MethodPut, path(processing), member, `{"position_ms": 1}`, 404},
		{"OthersPrivateMedia", http.MethodPut, path(private), member, `{"position_ms": 1}`, 404},
		{"OthersPrivateMediaOpen", http.MethodPost, path(private), member, nil, 404},
		{"OversizeBody", http.MethodPut, path(public), member, `{"position_ms": 1, "pad": "` + strings.Repeat("x", 2000) + `"}`, 413},
		{"OversizeBodyOverAppLimit", http.MethodPut, path(public), member, `{"pad": "` + strings.Repeat("x", 70<<10) + `"}`, 413},
		{"MissingToken", http.MethodPut, path(public), "", `{"position_ms": 1}`, 401},
		{"ExpiredToken", http.MethodPut, path(public), expired, `{"position_ms": 1}`, 401},
		{"TokenWithoutExp", http.MethodPut, path(public), noExp, `{"position_ms": 1}`, 401},
		{"ForgedToken", http.MethodPut, path(public), forged, `{"position_ms": 1}`, 401},
		{"WrongAlgorithmHS512", http.MethodPut, path(public), hs512, `{"position_ms": 1}`, 401},
		{"AlgorithmNone", http.MethodPut, path(public), none, `{"position_ms": 1}`, 401},
		{"SubjectNotAMember", http.MethodPut, path(public), badSubject, `{"position_ms": 1}`, 401},
		{"GarbageToken", http.MethodPut, path(public), "not.a.jwt", `{"position_ms": 1}`, 401},
		{"NonAdminCreatesMedia", http.MethodPost, "/v1/admin/media", member, `{"title":"x"}`, 403},
		{"NonAdminPatchesMedia", http.MethodPatch, fmt.Sprintf("/v1/admin/media/%d", public), member, `{"visibility":"PRIVATE"}`, 403},
		{"AdminBadVisibility", http.MethodPost, "/v1/admin/media", b.admin, `{"title":"x","visibility":"SECRET"}`, 422},
		{"AdminUnknownField", http.MethodPost, "/v1/admin/media", b.admin, `{"title":"x","colour":"red"}`, 400},
		{"AdminEmptyPatch", http.MethodPatch, fmt.Sprintf("/v1/admin/media/%d", public), b.admin, `{}`, 422},
		{"AdminPatchUnknownMedia", http.MethodPatch, "/v1/admin/media/987654", b.admin, `{"title":"y"}`, 404},
		{"BadListLimit", http.MethodGet, "/v1/playback?limit=0", member, nil, 400},
		{"BadListCursor", http.MethodGet, "/v1/playback?cursor=%%%", member, nil, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := b.do(t, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", status, tc.status, body)
			}
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
				t.Fatalf("body %q is not a JSON error", body)
			}
		})
	}
	b.flushNow(t)
	if n := b.count(t, `SELECT count(*) FROM playback`); n != 0 {
		t.Fatalf("%d playback rows written by bad requests", n)
	}
	if n := b.count(t, `SELECT count(*) FROM media WHERE title IN ('x', 'y')`); n != 0 {
		t.Fatalf("%d media rows written by bad requests", n)
	}
}

// A full buffer behind a stuck flush still answers 204 at once, and counts every position it
// did not take: what the flusher writes once released plus what was counted lost is all of
// them. (How many the flusher takes into its held set before its first flush blocks depends on
// scheduling, so the split is not fixed; that most are dropped is.)
func TestPlayback_DropStillAnswers204(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var written atomic.Int64
	b := setup(t, options{capacity: 2, flushBatch: 1, flush: func(_ context.Context, batch []buffer.Entry[playback.Key, playback.Position]) error {
		<-release
		written.Add(int64(len(batch)))
		return nil
	}})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	const members = 50
	for member := int64(1); member <= members; member++ {
		if status, body := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), token(t, member, false), `{"position_ms": 1000}`); status != http.StatusNoContent {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	close(release)
	if err := b.buf.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	families, _ := b.reg.Gather()
	var dropped float64
	for _, f := range families {
		if f.GetName() != "playhead_playback_buffer_lost_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetValue() == "full" {
				dropped = m.GetCounter().GetValue()
			}
		}
	}
	if int64(dropped)+written.Load() != members {
		t.Errorf("%v dropped + %d written = %d, want every one of %d positions either written or counted",
			dropped, written.Load(), int64(dropped)+written.Load(), members)
	}
	// The channel holds 2 keys; the flusher takes a few more before its flush blocks.
	if dropped < members/2 {
		t.Errorf("dropped = %v of %d behind a stuck flush with a channel of 2, want most of them", dropped, members)
	}
}

func TestPlayback_ListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tok := token(t, 5, false)
	var ids []int64
	for i := range 5 {
		ids = append(ids, b.createMedia(t, map[string]any{"title": fmt.Sprintf("film %d", i), "duration_ms": 600_000}))
	}
	hiddenID := b.createMedia(t, map[string]any{"title": "hidden", "duration_ms": 600_000})
	for _, id := range append(ids, hiddenID) {
		if status, body := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, `{"position_ms": 1000}`); status != http.StatusNoContent {
			t.Fatalf("PUT: %d %s", status, body)
		}
		time.Sleep(2 * time.Millisecond) // distinct event times
	}
	b.flushNow(t)
	if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d", hiddenID), tok, nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	var seen []int64
	cursor := ""
	for page := 0; page < 5; page++ {
		status, body := b.do(t, http.MethodGet, "/v1/playback?limit=2"+cursor, tok, nil)
		if status != http.StatusOK {
			t.Fatalf("GET list: %d %s", status, body)
		}
		var resp struct {
			Items      []playback.Item `json:"items"`
			NextCursor string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		for _, it := range resp.Items {
			seen = append(seen, it.MediaID)
		}
		if resp.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + resp.NextCursor
	}
	want := []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("list = %v, want %v (newest first, hidden excluded)", seen, want)
	}
}

// A position reported before a hide, but flushed after it, must not bring the row back.
func TestPlayback_HideIsNotUndoneByOlderBufferedPosition(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	tok := token(t, 8, false)
	if status, _ := b.do(t, http.MethodPost, fmt.Sprintf("/v1/playback/%d", id), tok, nil); status != http.StatusOK {
		t.Fatal("POST failed")
	}
	if status, _ := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, `{"position_ms": 9000}`); status != http.StatusNoContent {
		t.Fatal("PUT failed")
	}
	if status, body := b.do(t, http.MethodDelete, fmt.Sprintf("/v1/playback/%d", id), tok, nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	b.flushNow(t) // the older PUT reaches the database after the hide
	if n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = 8 AND media_id = $1 AND hidden`, id); n != 1 {
		t.Fatal("the row is not hidden after an older position was flushed")
	}
}

// A media made private by an admin stops accepting other members' positions: the PATCH's
// notification evicts the cached entry (the cache's TTL is far longer than the test).
func TestPlayback_AdminChangeTakesEffect(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	connected := make(chan struct{}, 1)
	listener := notify.NewListener(b.dbURL, slog.Default())
	listener.Handle(media.ChannelChanged, b.cache.EvictPayload, func() {
		b.cache.Clear()
		connected <- struct{}{}
	})
	if err := listener.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Stop(context.Background()) })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("listener did not connect")
	}
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	tok := token(t, 9, false)
	if status, _ := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, `{"position_ms": 1}`); status != http.StatusNoContent {
		t.Fatal("PUT before the change failed")
	}
	if status, body := b.do(t, http.MethodPatch, fmt.Sprintf("/v1/admin/media/%d", id), b.admin, `{"visibility":"PRIVATE"}`); status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", status, body)
	}
	// The notification arrives asynchronously: wait for it. The deadline is only for failure,
	// and shorter than the cache's TTL (60 s), so that only the notification can evict.
	giveUp := time.Now().Add(30 * time.Second)
	for {
		status, _ := b.do(t, http.MethodPut, fmt.Sprintf("/v1/playback/%d", id), tok, `{"position_ms": 2}`)
		if status == http.StatusNotFound {
			return
		}
		if status != http.StatusNoContent || time.Now().After(giveUp) {
			t.Fatalf("PUT after the media went private = %d, want 404 once the change's notification arrived", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A member over the PUT rate limit gets 429 with Retry-After; other members are unaffected.
func TestPlayback_RateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{limit: ratelimit.New(0.2, 3)}) // one every 5 s, burst 3
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	path := fmt.Sprintf("/v1/playback/%d", id)
	greedy, other := token(t, 70, false), token(t, 71, false)
	for i := range 3 {
		if status, body := b.do(t, http.MethodPut, path, greedy, `{"position_ms": 1}`); status != http.StatusNoContent {
			t.Fatalf("PUT %d within the burst: %d %s", i, status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPut, b.baseURL+path, strings.NewReader(`{"position_ms": 2}`))
	req.Header.Set("Authorization", "Bearer "+greedy)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT over the limit = %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if status, _ := b.do(t, http.MethodPut, path, other, `{"position_ms": 1}`); status != http.StatusNoContent {
		t.Fatalf("another member was limited: %d", status)
	}
}

// TestPlayback_PutTakesJSONOnly: a report whose body is not declared JSON (no Content-Type,
// text/plain, a form) is refused with 415 and a JSON error, however JSON-like its body, and
// nothing of it is buffered; what players send (application/json, with or without a charset:
// the player page, k6/playback.js, cmd/loadgen) is stored.
func TestPlayback_PutTakesJSONOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	path, tok := fmt.Sprintf("/v1/playback/%d", id), token(t, 43, false)
	send := func(contentType string, position int) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, b.baseURL+path, strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, position)))
		req.Header.Set("Authorization", "Bearer "+tok)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"} {
		if status, msg := send(ct, 1000*(i+1)); status != http.StatusNoContent {
			t.Errorf("PUT with Content-Type %q: %d %q, want 204", ct, status, msg)
		}
	}
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "text/json", "application/json-patch+json", "application/json;;"} {
		if status, msg := send(ct, 9000); status != http.StatusUnsupportedMediaType || !strings.Contains(msg, "Content-Type must be application/json") {
			t.Errorf("PUT with Content-Type %q: %d %q, want 415 with a JSON error naming application/json", ct, status, msg)
		}
	}
	status, body := b.do(t, http.MethodGet, path, tok, nil)
	var got positionBody
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || got.PositionMS != 3000 {
		t.Fatalf("GET after the reports: %d %s, want the last accepted position, 3000 (a refused report must not be buffered)", status, body)
	}
}
