package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/export"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/xapitest"
	"github.com/playhead/playhead/xapi"
)

// lrsStub is a Learning Record Store on loopback that records every POST to /xapi/statements
// and answers the first one 503 (the LRS away for a moment), every other one 200.
type lrsStub struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	seen   chan struct{} // one value per request, after it is recorded
}

func newLRSStub(t *testing.T) *lrsStub {
	l := &lrsStub{seen: make(chan struct{}, 100)}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		first := len(l.bodies) == 0
		ok := r.Method == http.MethodPost && r.URL.Path == "/xapi/statements" && r.Header.Get("X-Experience-API-Version") == xapi.Version
		if ok {
			l.bodies = append(l.bodies, body)
		}
		l.mu.Unlock()
		switch {
		case !ok:
			w.WriteHeader(http.StatusBadRequest)
		case first:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
		l.seen <- struct{}{}
	}))
	t.Cleanup(l.Close)
	return l
}

// statements returns what the stub recorded, by statement id: every body of each id (the 503'd
// one is sent again), and how many requests that is.
func (l *lrsStub) statements(t *testing.T) (map[string][]string, int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for _, b := range l.bodies {
		var s struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("the LRS received %s: %v", b, err)
		}
		out[s.ID] = append(out[s.ID], string(b))
	}
	return out, len(l.bodies)
}

// TestXAPI_StatementsThroughTheBinary: a member finishes a course's two lessons, the first by
// playing to its end, the second marked watched by hand. The node, with xAPI on, posts three
// statements to a loopback LRS (each lesson, then the course): every one passes the
// third-party validator (npm @learninglocker/xapi-validation), the first lesson's played
// segments are the watched ranges PostgreSQL holds, and the statement the LRS answered 503
// is sent again with the same id and the same bytes.
func TestXAPI_StatementsThroughTheBinary(t *testing.T) {
	dbURL := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	lessons := seedCourse(t, pool, "xAPI course", 2)
	lrs := newLRSStub(t)
	env := pipelineEnv("all", "xapi", t.TempDir(), t.TempDir(), "ultrafast")
	env["DATABASE_URL"] = dbURL
	env["PLAYHEAD_FLUSH_INTERVAL"] = "100ms"
	env["PLAYHEAD_XAPI_ENDPOINT"] = lrs.URL + "/xapi"
	env["PLAYHEAD_XAPI_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_XAPI_ACTIVITY_BASE"] = "https://videos.example"
	env["PLAYHEAD_XAPI_USERNAME"] = "key"
	env["PLAYHEAD_XAPI_PASSWORD"] = "secret"
	s := binarytest.Start(t, env)

	const member = 5
	token := binarytest.Token(t, member, false)
	// Reports a flush apart, each a second further (a play, not a seek): each flush marks the
	// buckets between the last two watched, and the last report, at 90 %, is the completion
	// point (95 % or the last 30 s of 5 minutes), so no report follows the finish.
	for pos := 261_000; pos <= 270_000; pos += 1000 {
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", lessons[0]), token, map[string]any{"position_ms": pos})
		waitPlaybackRow(t, pool, member, lessons[0], pos)
	}
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d/watched", lessons[1]), token, nil)

	giveUp := time.After(webhookTimeout)
	for got, n := lrs.statements(t); len(got) < 3 || n < 4; got, n = lrs.statements(t) {
		select {
		case <-lrs.seen:
		case <-giveUp:
			t.Fatalf("the LRS received %d statements (%d requests), want 3 (4 requests); node log:\n%s", len(got), n, s.Stderr)
		}
	}
	got, _ := lrs.statements(t)
	if len(got) != 3 {
		t.Fatalf("%d statement ids, want 3: %v", len(got), got)
	}
	var all [][]byte
	var lesson map[string]any
	for id, bodies := range got {
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Errorf("statement %s sent again with other bytes:\n%s\n%s", id, bodies[0], b)
			}
		}
		all = append(all, []byte(bodies[0]))
		var st map[string]any
		if err := json.Unmarshal([]byte(bodies[0]), &st); err != nil {
			t.Fatal(err)
		}
		if st["object"].(map[string]any)["id"] == "https://videos.example/media/"+strconv.FormatInt(lessons[0], 10) {
			lesson = st
		}
	}
	if out, ok := xapitest.Validate(t, filepath.Join("..", ".."), all); !ok {
		t.Fatalf("the validator refused the statements Playhead sent:\n%s", out)
	}
	if lesson == nil {
		t.Fatalf("no statement about lesson %d: %v", lessons[0], got)
	}
	var watched pgtype.Bits
	if err := pool.QueryRow(t.Context(), `SELECT watched FROM playback WHERE member_id = $1 AND media_id = $2`, member, lessons[0]).Scan(&watched); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range export.Ranges(watched, coursePageLessonMS) {
		want = append(want, ms3(r.StartMS)+"[.]"+ms3(r.EndMS))
	}
	segments := lesson["result"].(map[string]any)["extensions"].(map[string]any)["https://w3id.org/xapi/video/extensions/played-segments"]
	if len(want) == 0 || segments != strings.Join(want, "[,]") {
		t.Errorf("played segments %q, want %q (the stored watched ranges)", segments, strings.Join(want, "[,]"))
	}
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM xapi_statements`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d statements still stored (%v), want 0 once the LRS took them", left, err)
	}
}

// ms3 writes ms as seconds with three decimals, the played segments' form.
func ms3(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
