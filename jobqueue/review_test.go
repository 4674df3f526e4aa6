package jobqueue_test

// Hostile review of the queue console's API (issue 36). Each test states what it attacks.

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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

var reviewSecret = []byte("review-secret-review-secret-review!!")

// reviewServer serves the admin job routes as cmd/api wires them (/v1 behind the verifier,
// /v1/admin behind RequireAdmin) on a loopback port.
func reviewServer(t *testing.T, q *jobqueue.Queue) string {
	t.Helper()
	verifier, err := auth.NewVerifier(reviewSecret, 0)
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

func reviewToken(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint(reviewSecret, member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func reviewDo(t *testing.T, client *http.Client, method, url, tok string) (int, string, error) {
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
func TestReview_AdminRoutesRefuseHostileInputWithJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.enqueue(t, "work", 2)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	base := reviewServer(t, q)
	admin, member := reviewToken(t, 1, true), reviewToken(t, 2, false)
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
		status, body, err := reviewDo(t, client, c.method, base+c.path, c.tok)
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

// Job ids are bigint (bigserial), but List's `($3 = 0 OR id < $3)` makes PostgreSQL type $3
// from the literal 0: int4. Any before above 2^31-1, a valid job id, answers 500.
func TestReview_ListBeforeAboveInt4(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "work", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	base := reviewServer(t, q)
	admin := reviewToken(t, 1, true)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, before := range []string{"2147483647", "2147483648", "9223372036854775807"} {
		status, body, err := reviewDo(t, client, "GET", base+"/v1/admin/jobs?before="+before, admin)
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
func TestReview_CancelRacingCompletionHasOneWinner(t *testing.T) {
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
func TestReview_AdminActionsRacingEachOtherKeepJobAndMediaInStep(t *testing.T) {
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

// A cancelled PROCESSING job's worker stops: its run's context ends within a heartbeat (a
// third of the lease), and the job stays DEAD with its media FAILED.
func TestReview_ACancelledRunningJobsWorkerStops(t *testing.T) {
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
	startRunner(t, q, jobqueue.RunnerConfig{Kind: "long", Node: "n", Concurrency: 1, PollInterval: 20 * time.Millisecond})
	j := <-started
	cancelled := time.Now()
	if err := q.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-stopped:
		t.Logf("the worker stopped %v after the cancel: %v", time.Since(cancelled).Round(time.Millisecond), cause)
	case <-time.After(10 * lease):
		t.Fatalf("the worker of a cancelled job still runs %v later", 10*lease)
	}
	time.Sleep(lease) // whatever the runner does after the run
	row, err := q.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != jobqueue.StatusDead || len(row.Errors) != 1 {
		t.Errorf("after its worker stopped the cancelled job is %s with errors %+v, want DEAD with the cancel alone", row.Status, row.Errors)
	}
}

// The error history is not capped in size by the queue: a kind whose error text is large is
// stored ten times over (each job row up to 10 × its error). Text PostgreSQL cannot store
// (invalid UTF-8, as a byte-cut ffmpeg stderr tail can be) makes the retry itself fail.
func TestReview_ErrorTextIsNotCappedAndInvalidUTF8FailsTheFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "big", 1)
	q := newQueue(t, b.pool, time.Minute, mediaKind("big", nil))
	ctx := context.Background()
	huge := strings.Repeat("x", 1<<20)
	var id int64
	for range 10 {
		jobs, err := q.Claim(ctx, "big", 1, "node")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %v %v", jobs, err)
		}
		id = jobs[0].ID
		if err := q.Retry(ctx, jobs[0], huge, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE jobs SET attempt_count = 0 WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	var size int64
	if err := b.pool.QueryRow(ctx, `SELECT octet_length(errors::text) FROM jobs WHERE id = $1`, id).Scan(&size); err != nil {
		t.Fatal(err)
	}
	t.Logf("one job's errors column holds %d bytes (error text 1 MiB, uncapped)", size)
	if size < 10<<20 {
		t.Logf("errors %d bytes: the text was capped", size)
	}

	jobs, err := q.Claim(ctx, "big", 1, "node")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	// "…" + the last 500 bytes of stderr, cut inside a rune (encoder.runLogged).
	tail := "…" + strings.Repeat("é", 300)[1:]
	err = q.Retry(ctx, jobs[0], tail, 0)
	t.Logf("Retry with invalid UTF-8 error text: %v", err)
	if err == nil {
		t.Skip("PostgreSQL stored invalid UTF-8?")
	}
	row, gerr := q.Get(ctx, jobs[0].ID)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if row.Status == jobqueue.StatusProcessing {
		t.Errorf("the retry failed on the error's text (%v): the job stays PROCESSING until its lease expires, its error lost", err)
	}
}

// A database that is down answers 500 with JSON at once; one that stops answering (a network
// partition) leaves an admin call unanswered until the database comes back: nothing bounds it
// (no statement timeout, no deadline on the request's context).
func TestReview_AdminCallOnAPartitionedDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "p", 1)
	conf := pgtest.Shared(t).Config
	proxy, err := faultproxy.Start(net.JoinHostPort(conf.Host, conf.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	url, err := proxy.URL(b.url)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := newQueue(t, pool, time.Minute, mediaKind("p", nil))
	base := reviewServer(t, q)
	admin := reviewToken(t, 1, true)
	client := &http.Client{Timeout: 20 * time.Second}
	if status, body, err := reviewDo(t, client, "GET", base+"/v1/admin/jobs/counts", admin); err != nil || status != 200 {
		t.Fatalf("counts before the partition: %d %s %v", status, body, err)
	}
	short := &http.Client{Timeout: 3 * time.Second}
	// A database that is down (connections refused): 500 with JSON, at once.
	proxy.Refuse(true)
	proxy.ResetAll()
	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/counts", "/v1/admin/jobs/1"} {
		status, body, err := reviewDo(t, short, "GET", base+path, admin)
		if err != nil || status != http.StatusInternalServerError && status != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s with the database down: %d %q %v, want 500/503 with JSON", path, status, body, err)
		}
	}
	for _, path := range []string{"/v1/admin/jobs/1/cancel", "/v1/admin/jobs/1/retry"} {
		status, body, err := reviewDo(t, short, "POST", base+path, admin)
		if err != nil || status < 500 || !strings.Contains(body, `"error"`) {
			t.Errorf("POST %s with the database down: %d %q %v, want 5xx with JSON", path, status, body, err)
		}
	}
	proxy.Refuse(false)
	proxy.Partition()
	start := time.Now()
	status, body, err := reviewDo(t, short, "GET", base+"/v1/admin/jobs/counts", admin)
	t.Logf("counts during the partition: %d %q %v after %v", status, body, err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Errorf("GET /v1/admin/jobs/counts on a partitioned database did not answer within 3 s (%v); no timeout bounds an admin call", err)
	}
	proxy.Heal()
}
