package main

// The queue console end to end: the real binary, PostgreSQL and ffmpeg, two webhook receivers
// on loopback that answer 503 (so one upload's two deliveries become DEAD jobs), and Debian's
// Chromium driven by web/e2e/jobs.mjs, which finds the DEAD jobs on top, cancels a newer job
// still to run, opens a DEAD one, retries it through the selection once its receiver is healed
// and sees it COMPLETED, and discards the other, then pauses a kind from the kinds table and
// resumes it, while this test checks the database.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// jobsPageRow is one row of the console's jobs table.
type jobsPageRow struct {
	ID        int64    `json:"id"`
	Kind      string   `json:"kind"`
	Status    string   `json:"status"`
	Attempts  string   `json:"attempts"`
	LastError string   `json:"lastError"`
	Actions   []string `json:"actions"`
}

// jobsPageKind is one row of the console's kinds table.
type jobsPageKind struct {
	Kind       string `json:"kind"`
	Paused     bool   `json:"paused"`
	State      string `json:"state"`
	Running    string `json:"running"`
	Pending    string `json:"pending"`
	Priorities string `json:"priorities"`
	Partitions string `json:"partitions"`
	Action     string `json:"action"`
}

type jobsPageEvent struct {
	Event        string                      `json:"event"`
	Message      string                      `json:"message"`
	Rows         []jobsPageRow               `json:"rows"`
	Kinds        []jobsPageKind              `json:"kinds"`
	Counts       map[string]map[string]int64 `json:"counts"`
	Title        string                      `json:"title"`
	Facts        map[string]string           `json:"facts"`
	Errors       [][]string                  `json:"errors"`
	Focused      string                      `json:"focused"`
	Outcome      string                      `json:"outcome"`
	DetailStatus string                      `json:"detailStatus"`
	Dialogs      []string                    `json:"dialogs"`
	Problems     []string                    `json:"problems"`
	// Accessibility are the axe-core violations (WCAG 2.1 A and AA) the page had.
	Accessibility []string `json:"accessibility"`
	Notice        string   `json:"notice"`
}

func TestJobsPage_DeadJobRetriedAndDiscardedInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	env := webhookEnv(t, "e2e-jobs-page", t.TempDir())
	env["PLAYHEAD_WEBHOOK_MAX_ATTEMPTS"] = "1"
	s := binarytest.Start(t, env)
	pool := s.Pool(t)
	admin := binarytest.Token(t, 1, true)

	var healed atomic.Bool
	retried := newReceiver(t, func(int) int {
		if healed.Load() {
			return http.StatusNoContent
		}
		return http.StatusServiceUnavailable
	})
	discarded := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	// media.ready only: the cancelled job's media.failed must not add deliveries.
	register := func(url string) registered {
		var r registered
		out := s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/webhooks"), admin, map[string]any{"url": url, "events": []string{"media.ready"}})
		if err := json.Unmarshal(out, &r); err != nil || r.ID <= 0 {
			t.Fatalf("POST /v1/admin/webhooks answered %s (%v)", out, err)
		}
		return r
	}
	retriedHook, discardedHook := register(retried.URL), register(discarded.URL)
	mediaID, _ := readyUpload(t, s, binarytest.Token(t, 41, false), "console clip", "PRIVATE")
	retryDelivery := waitDelivery(t, s, admin, retriedHook.ID, mediaID, "DEAD")
	discardDelivery := waitDelivery(t, s, admin, discardedHook.ID, mediaID, "DEAD")
	healed.Store(true)
	retryJob, discardJob := *retryDelivery.JobID, *discardDelivery.JobID
	// A job newer than both, still to run (due tomorrow): listed below the DEAD ones, and
	// cancelled from its row.
	waiting := positiveOwnedID(t, s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/media"), admin,
		map[string]any{"title": "waiting", "duration_ms": 60_000}))
	var cancelJob int64
	if err := pool.QueryRow(t.Context(), `INSERT INTO jobs (kind, subject_id, max_attempts, available_at)
		VALUES ('ingest', $1, 3, statement_timestamp() + interval '1 day') RETURNING id`, waiting).Scan(&cancelJob); err != nil {
		t.Fatal(err)
	}

	shots := screenshotsDir(t)
	script := startBrowserScript(t, root, node, "jobs.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+admin,
		fmt.Sprintf("PLAYHEAD_RETRY=%d", retryJob), fmt.Sprintf("PLAYHEAD_DISCARD=%d", discardJob),
		fmt.Sprintf("PLAYHEAD_CANCEL=%d", cancelJob), "PLAYHEAD_PAUSE=xapi_statement", "PLAYHEAD_SHOTS="+shots)
	events := map[string]jobsPageEvent{}
	for {
		var ev jobsPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("jobs.mjs failed (%v): %s", err, events["error"].Message)
	}

	// DEAD first: the two DEAD deliveries above the PENDING job, which is newer than both.
	listed := events["listed"]
	if len(listed.Rows) < 4 {
		t.Fatalf("the console listed %+v, want the two DEAD jobs, the pending one and the encode", listed.Rows)
	}
	for i, r := range listed.Rows[:2] {
		if r.Status != "DEAD" || r.Kind != "webhook" || !strings.Contains(r.LastError, "503") || strings.Join(r.Actions, ",") != "retry,discard" {
			t.Errorf("row %d of the console: %+v, want a DEAD webhook job with the receiver's 503 and retry and discard buttons", i, r)
		}
	}
	if r := listed.Rows[2]; r.ID != cancelJob || r.Status != "PENDING" || strings.Join(r.Actions, ",") != "cancel" {
		t.Errorf("row 2 of the console: %+v, want the PENDING job %d (the newest) with a cancel button", r, cancelJob)
	}
	for _, r := range listed.Rows[2:] {
		if r.Status == "DEAD" {
			t.Errorf("a DEAD job below the others: %+v", r)
		}
	}
	if c := listed.Counts["webhook"]; c["DEAD"] != 2 || c["PENDING"] != 0 {
		t.Errorf("the counts show webhook jobs %v, want 2 DEAD", c)
	}
	if c := listed.Counts["encode"]; c["COMPLETED"] != 1 {
		t.Errorf("the counts show encode jobs %v, want 1 COMPLETED", c)
	}

	detail := events["detail"]
	if detail.Title != fmt.Sprintf("Job #%d", retryJob) || detail.Facts["Status"] != "DEAD" || detail.Facts["Kind"] != "webhook" ||
		len(detail.Errors) != 1 || detail.Errors[0][0] != "1" || !strings.Contains(detail.Errors[0][2], "503") || detail.Focused != "detail-title" {
		t.Errorf("the job's detail: %+v, want job %d DEAD with attempt 1's 503, focused", detail, retryJob)
	}

	completed := events["completed"]
	for _, r := range completed.Rows {
		if r.ID == discardJob {
			t.Errorf("the discarded job %d is still listed: %+v", discardJob, r)
		}
		if r.ID == cancelJob && r.Status != "DEAD" {
			t.Errorf("the cancelled job: %+v, want DEAD", r)
		}
		if r.ID == retryJob && (r.Status != "COMPLETED" || len(r.Actions) != 0) {
			t.Errorf("the retried job: %+v, want COMPLETED without actions", r)
		}
	}
	if completed.DetailStatus != "COMPLETED" || !strings.Contains(completed.Outcome, fmt.Sprintf("Discarded job %d", discardJob)) ||
		len(completed.Dialogs) != 2 || !strings.Contains(completed.Dialogs[0], "Cancel") || !strings.Contains(completed.Dialogs[1], "Discard") {
		t.Errorf("after the actions: detail %q, outcome %q, dialogs %q; want COMPLETED, the discard said, a confirmation each for the cancel and the discard",
			completed.DetailStatus, completed.Outcome, completed.Dialogs)
	}
	var status string
	var attempts int
	if err := pool.QueryRow(t.Context(), `SELECT status, attempt_count FROM jobs WHERE id = $1`, retryJob).Scan(&status, &attempts); err != nil ||
		status != "COMPLETED" || attempts != 1 {
		t.Errorf("the retried job in the database: %s after %d attempts (%v), want COMPLETED after 1", status, attempts, err)
	}
	var lastError, mediaStatus string
	if err := pool.QueryRow(t.Context(), `SELECT j.status, j.last_error, m.status FROM jobs j JOIN media m ON m.id = j.subject_id WHERE j.id = $1`,
		cancelJob).Scan(&status, &lastError, &mediaStatus); err != nil || status != "DEAD" || lastError != "cancelled by an administrator" || mediaStatus != "FAILED" {
		t.Errorf("the cancelled job in the database: %s %q, its media %s (%v); want DEAD, cancelled by an administrator, media FAILED",
			status, lastError, mediaStatus, err)
	}
	var gone bool
	if err := pool.QueryRow(t.Context(), `SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`, discardJob).Scan(&gone); err != nil || !gone {
		t.Errorf("the discarded job %d is still in the database (%v)", discardJob, err)
	}
	waitDelivery(t, s, admin, retriedHook.ID, mediaID, "DELIVERED")
	if n := len(retried.requests()); n != 2 {
		t.Errorf("the healed receiver got %d requests, want 2 (the 503, then the retry)", n)
	}
	if n := len(discarded.requests()); n != 1 {
		t.Errorf("the discarded job's receiver got %d requests, want 1", n)
	}

	if f := events["focus"].Focused; f != fmt.Sprintf("select-%d", retryJob) {
		t.Errorf("after a refresh the focus is on %q, want the checkbox it was on (select-%d)", f, retryJob)
	}
	older := events["older"].Rows
	if len(older) == 0 {
		t.Error("older than the retried job: nothing listed, want the encode job at least")
	}
	for _, r := range older {
		if r.ID >= retryJob {
			t.Errorf("older than job %d: job %d listed", retryJob, r.ID)
		}
	}

	// The kinds table: the PENDING ingest job (partition "", normal priority) as the console
	// first showed it; then xapi_statement paused by the admin (member 1) and resumed, with
	// the database's pause row there while paused and gone after.
	kindRow := func(ev jobsPageEvent, kind string) jobsPageKind {
		for _, k := range ev.Kinds {
			if k.Kind == kind {
				return k
			}
		}
		t.Errorf("%s: no %s row in the kinds table %+v", ev.Event, kind, ev.Kinds)
		return jobsPageKind{}
	}
	if k := kindRow(listed, "ingest"); k.Paused || k.State != "Active" || k.Pending != "1" || k.Priorities != "0 · 1 · 0" ||
		k.Partitions != "(none): 1" || k.Running != "0 (no limit)" || k.Action != "pause" {
		t.Errorf("the console's ingest row: %+v, want active, 1 pending of normal priority in the partition \"\", no limit, a pause button", k)
	}
	paused := events["paused"]
	if k := kindRow(paused, "xapi_statement"); !k.Paused || !strings.HasPrefix(k.State, "Paused by member 1") || k.Action != "resume" ||
		paused.Outcome != "Paused xapi_statement." || len(paused.Dialogs) != 3 || !strings.Contains(paused.Dialogs[2], "Pause xapi_statement on every node") {
		t.Errorf("after the pause: %+v, outcome %q, dialogs %q; want paused by member 1 with a resume button, after a confirmation", k, paused.Outcome, paused.Dialogs)
	}
	resumed := events["resumed"]
	if k := kindRow(resumed, "xapi_statement"); k.Paused || k.State != "Active" || k.Action != "pause" || resumed.Outcome != "Resumed xapi_statement." {
		t.Errorf("after the resume: %+v, outcome %q; want active with a pause button", k, resumed.Outcome)
	}
	var pauses int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM job_kind_pauses`).Scan(&pauses); err != nil || pauses != 0 {
		t.Errorf("%d pauses left in the database (%v), want none after the resume", pauses, err)
	}

	done := events["done"]
	if len(done.Problems) > 0 || done.Notice != "" {
		t.Errorf("the page reported problems %q, notice %q", done.Problems, done.Notice)
	}
	for _, v := range done.Accessibility {
		t.Errorf("accessibility violation: %s", v)
	}
	b, err := os.ReadFile(filepath.Join(shots, "jobs-console.png"))
	if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("screenshot jobs-console.png: %d bytes, %v; want a PNG", len(b), err)
	}
}
