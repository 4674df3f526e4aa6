package jobqueue_test

// The queue console's API attacked through HTTP as cmd/api wires it: other callers, bad
// input, races between admin actions and workers, error texts a database cannot store, a
// database that is down. Each test states what it attacks.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

var adminTestSecret = []byte("admin-test-secret-admin-test-secret!")

// adminServer serves the admin job routes as cmd/api wires them (/v1 behind the verifier,
// /v1/admin behind RequireAdmin) on a loopback port.
func adminServer(t *testing.T, q *jobqueue.Queue) string {
	t.Helper()
	verifier, err := auth.NewVerifier(adminTestSecret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, Logger: quiet})
	v1 := app.Group("/v1", verifier.Middleware())
	admin := v1.Group("/admin", auth.RequireAdmin)
	(&jobqueue.AdminHandler{Queue: q}).Register(admin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String()
}

func adminToken(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint(adminTestSecret, member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func adminDo(t *testing.T, client *http.Client, method, url, tok string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// Every refusal is JSON {"error": "..."} with the right status: a member without the admin
// role, no token, bad ids and bad query values; never a 500.
func TestAdmin_AdminRoutesRefuseHostileInputWithJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.enqueue(t, "work", 2)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	base := adminServer(t, q)
	admin, member := adminToken(t, 1, true), adminToken(t, 2, false)
	ctx := context.Background()
	var pending, done int64
	if err := b.pool.QueryRow(ctx, `SELECT id FROM jobs WHERE subject_id = $1`, ids[0]).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, `UPDATE jobs SET status = 'COMPLETED', completed_at = statement_timestamp()
		WHERE subject_id = $1 RETURNING id`, ids[1]).Scan(&done); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	type tc struct {
		method, path, tok string
		want              int
	}
	var cases []tc
	routes := []struct{ method, path string }{
		{"GET", "/v1/admin/jobs"}, {"GET", "/v1/admin/jobs/counts"}, {"GET", "/v1/admin/jobs/1"},
		{"POST", "/v1/admin/jobs/1/retry"}, {"POST", "/v1/admin/jobs/1/cancel"}, {"DELETE", "/v1/admin/jobs/1"},
		{"GET", "/V1/ADMIN/JOBS"}, {"POST", "/v1/admin/jobs/1/cancel/"},
	}
	for _, r := range routes {
		cases = append(cases, tc{r.method, r.path, member, http.StatusForbidden}, tc{r.method, r.path, "", http.StatusUnauthorized})
	}
	for _, v := range []string{"-1", "0", "abc", "99999999999999999999", "1.5", "%201", "%00", "0x10", "1e3", "%E2%80%8B1"} {
		cases = append(cases,
			tc{"GET", "/v1/admin/jobs?before=" + v, admin, http.StatusBadRequest},
			tc{"GET", "/v1/admin/jobs?limit=" + v, admin, http.StatusBadRequest},
			tc{"GET", "/v1/admin/jobs/" + v, admin, http.StatusBadRequest},
			tc{"POST", "/v1/admin/jobs/" + v + "/cancel", admin, http.StatusBadRequest},
			tc{"POST", "/v1/admin/jobs/" + v + "/retry", admin, http.StatusBadRequest},
			tc{"DELETE", "/v1/admin/jobs/" + v, admin, http.StatusBadRequest},
		)
	}
	for _, v := range []string{"1001", "-5"} {
		cases = append(cases, tc{"GET", "/v1/admin/jobs?limit=" + v, admin, http.StatusBadRequest})
	}
	for _, v := range []string{"nope", "%3Cscript%3Ealert(1)%3C/script%3E", "%00", "%FF", "WORK", "work%20"} {
		cases = append(cases, tc{"GET", "/v1/admin/jobs?kind=" + v, admin, http.StatusBadRequest})
	}
	for _, v := range []string{"nope", "%00", "%FF", "FAILED", "pending%20"} {
		cases = append(cases, tc{"GET", "/v1/admin/jobs?status=" + v, admin, http.StatusBadRequest})
	}
	missing := "9223372036854775807"
	cases = append(cases,
		tc{"GET", "/v1/admin/jobs/" + missing, admin, http.StatusNotFound},
		tc{"POST", "/v1/admin/jobs/" + missing + "/cancel", admin, http.StatusNotFound},
		tc{"POST", "/v1/admin/jobs/" + missing + "/retry", admin, http.StatusNotFound},
		tc{"DELETE", "/v1/admin/jobs/" + missing, admin, http.StatusNotFound},
		tc{"POST", "/v1/admin/jobs/" + itoa(done) + "/cancel", admin, http.StatusConflict},
		tc{"DELETE", "/v1/admin/jobs/" + itoa(done), admin, http.StatusConflict},
		tc{"DELETE", "/v1/admin/jobs/" + itoa(pending), admin, http.StatusConflict},
		tc{"POST", "/v1/admin/jobs/" + itoa(pending) + "/retry", admin, http.StatusConflict},
		tc{"GET", "/v1/admin/jobs?status=dead&kind=work&limit=1000", admin, http.StatusOK},
	)
	for _, c := range cases {
		status, body, err := adminDo(t, client, c.method, base+c.path, c.tok)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
			continue
		}
		if status != c.want {
			t.Errorf("%s %s = %d %s, want %d", c.method, c.path, status, body, c.want)
			continue
		}
		if status >= 400 {
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
				t.Errorf("%s %s = %d with body %q, want JSON {\"error\": ...}", c.method, c.path, status, body)
			}
		}
	}
	// Nothing the member tried changed a job.
	if n := b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'PENDING'`, pending); n != 1 {
		t.Error("the PENDING job changed")
	}
}

// Job ids are bigint. List's `($3 = 0 OR id < $3)` made PostgreSQL type $3 from the literal 0,
// as int4: any before above 2^31-1, a valid job id, answered 500.
func TestAdmin_ListPagesBeforeIDsPast32Bits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "work", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	base := adminServer(t, q)
	admin := adminToken(t, 1, true)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, before := range []string{"2147483647", "2147483648", "9223372036854775807"} {
		status, body, err := adminDo(t, client, "GET", base+"/v1/admin/jobs?before="+before, admin)
		if err != nil || status != http.StatusOK {
			t.Errorf("GET /v1/admin/jobs?before=%s = %d %s (%v), want 200 with the job", before, status, body, err)
		}
	}
	if _, err := q.List(context.Background(), jobqueue.Filter{Before: 1 << 31, Limit: 10}); err != nil {
		t.Errorf("List(Before: 2^31): %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A cancel racing the worker's completion (or its retry): exactly one wins, and the media
// agrees with the job (READY with COMPLETED, FAILED with DEAD), whichever it is.
func TestAdmin_CancelRacingCompletionHasOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 30
	mediaIDs := b.enqueue(t, "race", rounds)
	q := newQueue(t, b.pool, time.Minute, mediaKind("race", nil))
	ctx := context.Background()
	cancelWon, completeWon := 0, 0
	for i := range rounds {
		jobs, err := q.Claim(ctx, "race", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		j := jobs[0]
		var wg sync.WaitGroup
		var cancelErr, completeErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancelErr = q.Cancel(ctx, j.ID)
		}()
		workerRetries := i%3 == 2 // the worker's run failed: it retries instead of completing
		go func() {
			defer wg.Done()
			if workerRetries {
				completeErr = q.Retry(ctx, j, "boom", 0)
				return
			}
			completeErr = q.Complete(ctx, j, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `UPDATE media SET status = 'READY' WHERE id = $1`, j.Subject)
				return err
			})
		}()
		wg.Wait()
		row, err := q.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var mediaStatus string
		if err := b.pool.QueryRow(ctx, `SELECT status FROM media WHERE id = $1`, j.Subject).Scan(&mediaStatus); err != nil {
			t.Fatal(err)
		}
		switch {
		case workerRetries:
			// Either order ends DEAD: a retry first leaves it PENDING, which the cancel then ends.
			if cancelErr != nil || (completeErr != nil && !errors.Is(completeErr, jobqueue.ErrClaimLost)) ||
				row.Status != jobqueue.StatusDead || mediaStatus != "FAILED" {
				t.Errorf("round %d: cancel %v racing the worker's retry %v: job %s, media %s", i, cancelErr, completeErr, row.Status, mediaStatus)
			}
			continue
		case cancelErr == nil && errors.Is(completeErr, jobqueue.ErrClaimLost):
			cancelWon++
			if row.Status != jobqueue.StatusDead || mediaStatus != "FAILED" {
				t.Errorf("round %d: cancel won, but job %s and media %s", i, row.Status, mediaStatus)
			}
		case completeErr == nil && apperr.CodeOf(cancelErr) == apperr.Conflict:
			completeWon++
			if row.Status != jobqueue.StatusCompleted || mediaStatus != "READY" {
				t.Errorf("round %d: completion won, but job %s and media %s", i, row.Status, mediaStatus)
			}
		default:
			t.Errorf("round %d (media %d): cancel %v, complete %v; job %s media %s", i, mediaIDs[i], cancelErr, completeErr, row.Status, mediaStatus)
		}
	}
	t.Logf("cancel won %d, completion won %d", cancelWon, completeWon)
}

// A cancel racing an admin retry of a DEAD job, and a discard racing a retry: the job and its
// media always agree (PENDING with PROCESSING media, DEAD with FAILED media, gone with FAILED
// media), never a PROCESSING media without a job to make it READY.
func TestAdmin_AdminActionsRacingEachOtherKeepJobAndMediaInStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 20
	mediaIDs := b.enqueue(t, "dead", 2*rounds)
	q := newQueue(t, b.pool, time.Minute, mediaKind("dead", nil))
	ctx := context.Background()
	for i, m := range mediaIDs {
		var id int64
		if err := b.pool.QueryRow(ctx, `SELECT id FROM jobs WHERE subject_id = $1`, m).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := q.Cancel(ctx, id); err != nil { // DEAD, media FAILED
			t.Fatal(err)
		}
		second := q.Cancel
		name := "cancel"
		if i%2 == 1 {
			second, name = q.Discard, "discard"
		}
		var wg sync.WaitGroup
		var retryErr, otherErr error
		wg.Add(2)
		go func() { defer wg.Done(); retryErr = q.RetryDead(ctx, id) }()
		go func() { defer wg.Done(); otherErr = second(ctx, id) }()
		wg.Wait()
		var jobStatus *string
		var mediaStatus string
		if err := b.pool.QueryRow(ctx, `SELECT (SELECT status FROM jobs WHERE id = $1), (SELECT status FROM media WHERE id = $2)`,
			id, m).Scan(&jobStatus, &mediaStatus); err != nil {
			t.Fatal(err)
		}
		js := "gone"
		if jobStatus != nil {
			js = *jobStatus
		}
		ok := (js == "PENDING" && mediaStatus == "PROCESSING") || (js == "DEAD" && mediaStatus == "FAILED") || (js == "gone" && mediaStatus == "FAILED")
		if !ok {
			t.Errorf("retry (%v) racing %s (%v): job %s, media %s", retryErr, name, otherErr, js, mediaStatus)
		}
	}
}

// A cancelled PROCESSING job's worker stops: its next heartbeat finds the claim gone and ends
// the run's context; the run ends as a lost claim, and the job stays DEAD with the cancel as
// its only error.
func TestAdmin_ACancelledRunningJobsWorkerStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "long", 1)
	started := make(chan jobqueue.Job, 1)
	stopped := make(chan error, 1)
	kind := mediaKind("long", func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
		started <- j
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return jobqueue.Result{}, context.Cause(ctx)
	})
	const lease = 600 * time.Millisecond
	q := newQueue(t, b.pool, lease, kind)
	reg := prometheus.NewRegistry()
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "long", Node: "n", Concurrency: 1, PollInterval: 20 * time.Millisecond,
		Metrics: jobqueue.NewMetrics(reg, q)})
	j := <-started
	if err := q.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	// Its heartbeat finds the claim gone and ends the run (a worker that went on would hang
	// the test here).
	t.Logf("the worker stopped: %v", <-stopped)
	waitFor(t, "the runner's end of the cancelled run", func() bool { return outcomes(t, reg, "long") > 0 })
	if got := outcome(t, reg, "long", "claim_lost"); got != 1 {
		t.Errorf("the cancelled run ended as %v claim_lost, want 1", got)
	}
	row, err := q.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != jobqueue.StatusDead || len(row.Errors) != 1 {
		t.Errorf("after its worker stopped the cancelled job is %s with errors %+v, want DEAD with the cancel alone", row.Status, row.Errors)
	}
}

// An error's text never fails a finish: text PostgreSQL cannot store (invalid UTF-8, as a
// byte-cut tail of ffmpeg's stderr was, and NUL) made the retry itself fail, the job stayed
// PROCESSING until its lease ran out and its error was lost; a huge text was stored whole,
// ten times over in the history.
func TestAdmin_AnyErrorTextIsStoredAndBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "big", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("big", nil))
	ctx := context.Background()
	claim := func() jobqueue.Job {
		t.Helper()
		jobs, err := q.Claim(ctx, "big", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE jobs SET attempt_count = 0, max_attempts = 20 WHERE id = $1`, jobs[0].ID); err != nil {
			t.Fatal(err) // attempts left for every claim
		}
		return jobs[0]
	}
	huge := strings.Repeat("é", 1<<20) // 2 MiB
	for range 10 {
		if err := q.Retry(ctx, claim(), huge, 0); err != nil {
			t.Fatal(err)
		}
	}
	var lastError, history int
	j := claim()
	if err := b.pool.QueryRow(ctx, `SELECT octet_length(last_error), octet_length(errors::text) FROM jobs WHERE id = $1`, j.ID).Scan(&lastError, &history); err != nil {
		t.Fatal(err)
	}
	if lastError > 64<<10 || history > 10*2000*2+2000 {
		t.Errorf("after ten 2 MiB errors: last_error %d bytes, errors %d bytes; want at most 64 KiB and ten 2000-character entries", lastError, history)
	}
	// "…" + the last 500 bytes of stderr, cut inside a character, and a NUL.
	tail := "…" + strings.Repeat("é", 300)[1:] + "\x00end"
	if err := q.Retry(ctx, j, tail, 0); err != nil {
		t.Fatalf("Retry with invalid UTF-8 and NUL in its error: %v", err)
	}
	row, err := q.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := row.Errors[len(row.Errors)-1].Error
	if row.Status != jobqueue.StatusPending || !strings.HasPrefix(last, "…\uFFFD") || !strings.HasSuffix(last, "éend") {
		t.Errorf("after the retry: %s, last error %.20q…%q; want PENDING with the text kept readable", row.Status, last, last[len(last)-8:])
	}
	dead := claim()
	if err := q.Dead(ctx, dead, errors.New("\xff\x00")); err != nil {
		t.Fatalf("Dead with invalid UTF-8 and NUL in its error: %v", err)
	}
}

// A database that is down (connections refused) makes every admin route answer a 5xx with
// JSON. (One that stops answering, a network partition, leaves a call waiting until it is
// back or the client gives up: no route of the API bounds its database time; see
// docs/operations/guarantees.md, "Known limits".)
func TestAdmin_DatabaseDownAnswersWithJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "p", 1)
	proxy, pool := pgtest.ProxiedPool(t, b.url)
	q := newQueue(t, pool, time.Minute, mediaKind("p", nil))
	base := adminServer(t, q)
	admin := adminToken(t, 1, true)
	client := &http.Client{Timeout: 20 * time.Second}
	if status, body, err := adminDo(t, client, "GET", base+"/v1/admin/jobs/counts", admin); err != nil || status != 200 {
		t.Fatalf("counts before the partition: %d %s %v", status, body, err)
	}
	short := &http.Client{Timeout: 30 * time.Second}
	// A database that is down (connections refused): 500 with JSON, at once.
	proxy.Refuse(true)
	proxy.ResetAll()
	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/counts", "/v1/admin/jobs/1"} {
		status, body, err := adminDo(t, short, "GET", base+path, admin)
		if err != nil || status != http.StatusInternalServerError && status != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s with the database down: %d %q %v, want 500/503 with JSON", path, status, body, err)
		}
	}
	for _, path := range []string{"/v1/admin/jobs/1/cancel", "/v1/admin/jobs/1/retry"} {
		status, body, err := adminDo(t, short, "POST", base+path, admin)
		if err != nil || status < 500 || !strings.Contains(body, `"error"`) {
			t.Errorf("POST %s with the database down: %d %q %v, want 5xx with JSON", path, status, body, err)
		}
	}
}
