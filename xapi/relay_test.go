package xapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/xapitest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// lrs is a Learning Record Store stub on loopback: it records every POST and answers each with
// the next of its statuses (200 once they run out).
type lrs struct {
	srv      *httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	paths    []string
	statuses []int
}

func newLRS(t *testing.T, statuses ...int) *lrs {
	t.Helper()
	l := &lrs{statuses: statuses}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.bodies, l.headers, l.paths = append(l.bodies, body), append(l.headers, r.Header.Clone()), append(l.paths, r.URL.Path)
		status := http.StatusOK
		if len(l.statuses) > 0 {
			status, l.statuses = l.statuses[0], l.statuses[1:]
		}
		l.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`["x"]`))
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *lrs) received() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.bodies...)
}

var activities = Activities{Base: "https://videos.example", HomePage: "https://videos.example/members"}

// setup makes member 8's media 1 (10 minutes, "Lesson 1"), with a playback row whose watched
// ranges (member 7's) are 0-12 % and 50-100 %, and returns the pool.
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO members (id) VALUES (7), (8)`)
	exec(`INSERT INTO media (id, owner_id, title, status, duration_ms) OVERRIDING SYSTEM VALUE VALUES (1, 8, 'Lesson 1', 'READY', 600000)`)
	exec(`INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched)
		VALUES (7, 1, 590000, now(), now(), playhead_watch_range(0, 11) | playhead_watch_range(50, 99))`)
	return pool
}

// complete writes member 7's completions of media 1 and of the collection "Course A" to the
// outbox, as the completion events write them.
func complete(t *testing.T, pool *pgxpool.Pool, member int64) {
	t.Helper()
	at := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	if err := media.Outbox(t.Context(), pool, member, 1, media.OutboxPlaybackCompleted, map[string]any{
		"collections": []string{"Course A"}, "finished_at": at, "position_ms": 590000, "duration_ms": 600000, "how": media.FinishedByPosition,
	}); err != nil {
		t.Fatal(err)
	}
	if err := media.Outbox(t.Context(), pool, member, 1, media.OutboxCollectionCompleted, map[string]any{
		"collection_id": "Course A", "items": 1, "completed_at": at,
	}); err != nil {
		t.Fatal(err)
	}
}

// runJobs claims every statement job and runs it through sender once, finishing each as the
// runner does (complete, retry or DEAD), and returns the errors of the runs.
func runJobs(t *testing.T, pool *pgxpool.Pool, sender *Sender) []error {
	t.Helper()
	q, err := jobqueue.NewQueue(pool, time.Minute, sender.Kind())
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(t.Context(), KindSend, 100, "test")
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, j := range claimed {
		res, err := sender.run(t.Context(), j)
		switch {
		case err == nil:
			err = q.Complete(t.Context(), j, res.Commit)
		case jobqueue.IsPermanent(err):
			errs = append(errs, err)
			err = q.Dead(t.Context(), j, err)
		default:
			errs = append(errs, err)
			err = q.Retry(t.Context(), j, err.Error(), 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return errs
}

// The statements of a finished media and a finished course reach the LRS as the ADL Video
// Profile describes them, with the headers xAPI asks for, and the third-party validator finds
// nothing wrong in either; it does find what is wrong in a broken one.
func TestRelay_StatementsReachTheLRSValid(t *testing.T) {
	pool := setup(t)
	complete(t, pool, 7)
	store := newLRS(t)
	if n, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil || n != 2 {
		t.Fatalf("RelayOnce = %d, %v; want the 2 completions", n, err)
	}
	sender := NewSender(SenderConfig{Pool: pool, Endpoint: store.srv.URL + "/xapi/", Username: "key", Password: "secret", AllowPrivate: true})
	if errs := runJobs(t, pool, sender); len(errs) > 0 {
		t.Fatalf("runs failed: %v", errs)
	}
	got := store.received()
	if len(got) != 2 {
		t.Fatalf("the LRS received %d statements, want 2", len(got))
	}
	for i, h := range store.headers {
		if h.Get("X-Experience-API-Version") != "1.0.3" || h.Get("Content-Type") != "application/json" || store.paths[i] != "/xapi/statements" {
			t.Errorf("request %d: path %s, headers %v", i, store.paths[i], h)
		}
		if user, pass, ok := (&http.Request{Header: h}).BasicAuth(); !ok || user != "key" || pass != "secret" {
			t.Errorf("request %d: Basic credentials %q %q %v", i, user, pass, ok)
		}
	}
	var video, course map[string]any
	for _, b := range got {
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s["object"].(map[string]any)["id"] == "https://videos.example/media/1" {
			video = s
		} else {
			course = s
		}
	}
	if video == nil || course == nil {
		t.Fatalf("statements: %s", got)
	}
	result := video["result"].(map[string]any)
	ext := result["extensions"].(map[string]any)
	// Buckets 0-11 and 50-99 of 10 minutes: 0-72 s and 300-600 s, 372 s played.
	if seg := ext[extPlayedSegments]; seg != "0.000[.]72.000[,]300.000[.]600.000" {
		t.Errorf("played segments %v", seg)
	}
	if ext[extProgress] != 0.62 || ext[extTime] != 590.0 || result["duration"] != "PT372S" || result["completion"] != true {
		t.Errorf("result %v", result)
	}
	ctxExt := video["context"].(map[string]any)["extensions"].(map[string]any)
	// The default completion point: 95 % of 10 minutes (the last 30 s start there too).
	if ctxExt[extLength] != 600.0 || ctxExt[extCompletionLimit] != 0.95 {
		t.Errorf("context extensions %v", ctxExt)
	}
	cats := video["context"].(map[string]any)["contextActivities"].(map[string]any)
	if !strings.Contains(mustJSON(t, cats), `"id":"https://w3id.org/xapi/video"`) || !strings.Contains(mustJSON(t, cats), `"id":"https://videos.example/collections/Course%20A"`) {
		t.Errorf("context activities %s", mustJSON(t, cats))
	}
	if actor := mustJSON(t, video["actor"]); actor != `{"account":{"homePage":"https://videos.example/members","name":"7"},"objectType":"Agent"}` {
		t.Errorf("actor %s", actor)
	}
	if course["object"].(map[string]any)["id"] != "https://videos.example/collections/Course%20A" || course["verb"].(map[string]any)["id"] != VerbCompleted {
		t.Errorf("course statement %s", mustJSON(t, course))
	}
	if out, ok := xapitest.Validate(t, "..", got); !ok {
		t.Fatalf("the validator refused Playhead's statements:\n%s", out)
	}
	var broken map[string]any
	if err := json.Unmarshal(got[0], &broken); err != nil {
		t.Fatal(err)
	}
	broken["id"] = "not-a-uuid"
	broken["result"].(map[string]any)["duration"] = "372 seconds"
	delete(broken["verb"].(map[string]any), "id")
	out, ok := xapitest.Validate(t, "..", [][]byte{[]byte(mustJSON(t, broken))})
	if ok || !strings.Contains(out, "statement.id") || !strings.Contains(out, "result.duration") || !strings.Contains(out, "verb.id") {
		t.Fatalf("the validator on a statement with a bad id, duration and no verb id: ok %v:\n%s", ok, out)
	}
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM xapi_statements`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d statements left after the LRS stored them (%v), want 0", left, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A statement is sent again after a failure with the same id and content; the LRS's 409 (it
// has the id) ends it as stored; a 4xx refusal makes it DEAD at once with the answer in its
// error, and an admin retry sends it again.
func TestSend_RetriesAndRefusals(t *testing.T) {
	pool := setup(t)
	complete(t, pool, 7)
	// The two first attempts fail (503, then 429), then one is stored and one answered 409.
	store := newLRS(t, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusOK, http.StatusConflict)
	if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	sender := NewSender(SenderConfig{Pool: pool, Endpoint: store.srv.URL, AllowPrivate: true, Metrics: metrics})
	errs := runJobs(t, pool, sender)
	if len(errs) != 2 || jobqueue.IsPermanent(errs[0]) || jobqueue.IsPermanent(errs[1]) {
		t.Fatalf("first attempts: %v, want two retryable errors", errs)
	}
	if errs := runJobs(t, pool, sender); len(errs) != 0 {
		t.Fatalf("second attempts: %v, want none (200 and 409 both end a statement)", errs)
	}
	got := store.received()
	if len(got) != 4 {
		t.Fatalf("the LRS received %d requests, want 4", len(got))
	}
	first := map[string]string{}
	for _, b := range got {
		var s struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if before, ok := first[s.ID]; ok && before != string(b) {
			t.Errorf("statement %s sent again with other content:\n%s\n%s", s.ID, before, b)
		}
		first[s.ID] = string(b)
	}
	if len(first) != 2 {
		t.Fatalf("%d statement ids in 4 requests, want 2 (each sent twice)", len(first))
	}
	wantCounts(t, reg, map[string]float64{resultUnavailable: 2, resultStored: 1, resultDuplicate: 1})
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM xapi_statements`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d statements left (%v), want 0", left, err)
	}

	// A refusal: DEAD at once, kept, the LRS's answer in the job's error; an admin retry sends it.
	refusing := newLRS(t, http.StatusBadRequest)
	if err := media.Outbox(t.Context(), pool, 7, 1, media.OutboxCollectionCompleted, map[string]any{"collection_id": "Course B", "items": 1, "completed_at": time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	refused := NewSender(SenderConfig{Pool: pool, Endpoint: refusing.srv.URL, AllowPrivate: true, Metrics: metrics})
	if errs := runJobs(t, pool, refused); len(errs) != 1 || !jobqueue.IsPermanent(errs[0]) || !strings.Contains(errs[0].Error(), "HTTP 400") {
		t.Fatalf("a 400: %v, want one permanent error naming it", errs)
	}
	var job int64
	var status string
	if err := pool.QueryRow(t.Context(), `SELECT j.id, s.status FROM jobs j JOIN xapi_statements s ON s.id = j.subject_id WHERE j.kind = $1 AND j.status = 'DEAD'`, KindSend).Scan(&job, &status); err != nil || status != "DEAD" {
		t.Fatalf("the refused statement: %q (%v), want a DEAD job and a DEAD statement", status, err)
	}
	q, err := jobqueue.NewQueue(pool, time.Minute, refused.Kind())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.RetryDead(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if errs := runJobs(t, pool, refused); len(errs) != 0 || len(refusing.received()) != 2 {
		t.Fatalf("after the admin retry: %v, %d requests; want it stored at the second", errs, len(refusing.received()))
	}
	wantCounts(t, reg, map[string]float64{resultUnavailable: 2, resultStored: 2, resultDuplicate: 1, resultRejected: 1})

	// A node with xAPI off that runs a statement's job: DEAD at once, nothing sent anywhere.
	if err := media.Outbox(t.Context(), pool, 7, 1, media.OutboxCollectionCompleted, map[string]any{"collection_id": "Course C", "items": 1, "completed_at": time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if errs := runJobs(t, pool, NewSender(SenderConfig{Pool: pool, Metrics: metrics})); len(errs) != 1 || !errors.Is(errs[0], errOff) || !jobqueue.IsPermanent(errs[0]) {
		t.Fatalf("a job on a node with xAPI off: %v, want one permanent errOff", errs)
	}
	wantCounts(t, reg, map[string]float64{resultUnavailable: 2, resultStored: 2, resultDuplicate: 1, resultRejected: 1, resultOff: 1})

	// A retry of a DEAD job whose statement is gone (pruned, or its member erased) is refused.
	if err := pool.QueryRow(t.Context(), `SELECT id FROM jobs WHERE kind = $1 AND status = 'DEAD'`, KindSend).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `DELETE FROM xapi_statements WHERE status = 'DEAD'`); err != nil {
		t.Fatal(err)
	}
	if err := q.RetryDead(t.Context(), job); apperr.CodeOf(err) != apperr.Conflict {
		t.Fatalf("retry of a DEAD job whose statement is gone = %v, want a conflict", err)
	}
}

// wantCounts checks playhead_xapi_statements_total in reg by result: want's, and 0 for the
// other results, every one of which must be there.
func wantCounts(t *testing.T, reg *prometheus.Registry, want map[string]float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "playhead_xapi_statements_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for _, r := range []string{resultStored, resultDuplicate, resultRejected, resultUnavailable, resultUnreachable, resultRefused, resultOff} {
		if v, ok := got[r]; !ok || v != want[r] {
			t.Errorf("playhead_xapi_statements_total{result=%q} = %v (there: %v), want %v", r, v, ok, want[r])
		}
	}
}

// An erased member gets no statement: none is made for a completion relayed after the
// erasure, and one made before it and not yet sent is never sent.
func TestRelay_ErasedMembersStatementsAreDropped(t *testing.T) {
	pool := setup(t)
	complete(t, pool, 7)
	if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	complete(t, pool, 7) // another finish, relayed after the erasure
	if _, err := erasure.Erase(t.Context(), pool, 7, erasure.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	if n, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil || n != 2 {
		t.Fatalf("RelayOnce after the erasure = %d, %v; want the 2 rows marked", n, err)
	}
	var made int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM xapi_statements`).Scan(&made); err != nil || made != 2 {
		t.Fatalf("%d statements (%v), want the 2 made before the erasure only", made, err)
	}
	// The erasure's job deletes what names the member: its attempt's first transaction.
	job := (&erasure.Job{Pool: pool,
		DeleteMedia:   func(context.Context, pgx.Tx, int64) (int, error) { return 0, nil },
		ExpireUploads: func(context.Context) (int, error) { return 0, nil },
	}).Kind()
	if _, err := job.Run(t.Context(), jobqueue.Job{Kind: erasure.KindErase, Subject: 7}); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM xapi_statements`).Scan(&made); err != nil || made != 0 {
		t.Fatalf("%d statements after the erasure job (%v), want 0", made, err)
	}
	store := newLRS(t)
	if errs := runJobs(t, pool, NewSender(SenderConfig{Pool: pool, Endpoint: store.srv.URL, AllowPrivate: true})); len(errs) != 0 {
		t.Fatal(errs)
	}
	if n := len(store.received()); n != 0 {
		t.Fatalf("the LRS received %d statements of an erased member", n)
	}
}

// The LRS's address goes through the egress policy: a loopback LRS is refused (DEAD) unless
// allowed, and the configuration refuses a private address literal.
func TestSend_LoopbackRefusedUnlessAllowed(t *testing.T) {
	pool := setup(t)
	complete(t, pool, 7)
	store := newLRS(t)
	if _, err := NewRelay(pool, RelayConfig{Activities: activities, Completion: media.DefaultCompletion}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	errs := runJobs(t, pool, NewSender(SenderConfig{Pool: pool, Endpoint: store.srv.URL}))
	if len(errs) != 2 || !jobqueue.IsPermanent(errs[0]) || len(store.received()) != 0 {
		t.Fatalf("a loopback LRS: %v, %d received; want 2 permanent refusals and nothing sent", errs, len(store.received()))
	}
	for _, bad := range []string{"http://127.0.0.1:8080/xapi", "http://[::1]/", "http://10.0.0.8/", "http://169.254.169.254/", "ftp://lrs.example/", "https://u:p@lrs.example/", "https://lrs.example/?a=1", "lrs.example/xapi"} {
		if err := CheckURL(bad, true, false); err == nil {
			t.Errorf("CheckURL(%q) = nil, want refused", bad)
		}
	}
	if err := CheckURL("http://127.0.0.1:8080/xapi", true, true); err != nil {
		t.Errorf("CheckURL of loopback allowed = %v", err)
	}
}
