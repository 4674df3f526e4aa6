package jobqueue_test

// The kinds' routes of the queue console (GET /v1/admin/jobs/kinds, POST …/kinds/{kind}/pause
// and …/resume) through HTTP as cmd/api wires them, and the metrics of the same figures.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/jobqueue"
)

// kindsServer is adminServer with the administrator named as cmd/api names them.
func kindsServer(t *testing.T, q *jobqueue.Queue) string {
	t.Helper()
	verifier, err := auth.NewVerifier(adminTestSecret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, Logger: quiet})
	admin := app.Group("/v1", verifier.Middleware()).Group("/admin", auth.RequireAdmin)
	(&jobqueue.AdminHandler{Queue: q, Actor: func(c *fiber.Ctx) string {
		return fmt.Sprintf("member %d", auth.From(c).MemberID)
	}}).Register(admin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String()
}

// insertJobs enqueues one PENDING job of kind per spec, in one transaction.
func insertJobs(t *testing.T, b *bundle, specs ...jobqueue.Spec) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		for _, s := range specs {
			if s.MaxAttempts == 0 {
				s.MaxAttempts = 3
			}
			if _, err := jobqueue.Insert(context.Background(), tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kindsOf reads GET /v1/admin/jobs/kinds, by kind.
func kindsOf(t *testing.T, client *http.Client, base, tok string) map[string]jobqueue.KindState {
	t.Helper()
	status, body, err := adminDo(t, client, "GET", base+"/v1/admin/jobs/kinds", tok)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /v1/admin/jobs/kinds = %d %s (%v)", status, body, err)
	}
	var answer struct {
		Kinds []jobqueue.KindState `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatalf("GET /v1/admin/jobs/kinds: %v in %s", err, body)
	}
	out := map[string]jobqueue.KindState{}
	for _, k := range answer.Kinds {
		out[k.Kind] = k
	}
	return out
}

// kindAction POSTs a pause or a resume and decodes the kind it answers.
func kindAction(t *testing.T, client *http.Client, base, tok, kind, action string) jobqueue.KindState {
	t.Helper()
	status, body, err := adminDo(t, client, "POST", base+"/v1/admin/jobs/kinds/"+kind+"/"+action, tok)
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST …/kinds/%s/%s = %d %s (%v)", kind, action, status, body, err)
	}
	var s jobqueue.KindState
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("POST …/kinds/%s/%s: %v in %s", kind, action, err, body)
	}
	return s
}

// TestAdminKinds_ListShowsLimitsRunningPrioritiesAndPartitions: every registered kind is
// listed (an idle one with zeros and an empty partition list), with its limit, its jobs
// running under a live lease (an expired lease does not count: the limit does not count it
// either), its PENDING jobs by priority, and its ten largest partitions, the largest first.
func TestAdminKinds_ListShowsLimitsRunningPrioritiesAndPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	limited := mediaKind("work", nil)
	limited.MaxRunning = 3
	q := newQueue(t, b.pool, time.Minute, limited, mediaKind("idle", nil))
	base := kindsServer(t, q)
	client := &http.Client{Timeout: 10 * time.Second}

	var specs []jobqueue.Spec
	for i := range 5 {
		specs = append(specs, jobqueue.Spec{Kind: "work", Subject: int64(100 + i), Partition: "41", Priority: jobqueue.PriorityLow})
	}
	for i := range 3 {
		specs = append(specs, jobqueue.Spec{Kind: "work", Subject: int64(200 + i), Partition: "", Priority: jobqueue.PriorityHigh})
	}
	// Eleven partitions of one job each: one more than the list holds.
	for i := range 11 {
		specs = append(specs, jobqueue.Spec{Kind: "work", Subject: int64(300 + i), Partition: fmt.Sprintf("p%02d", i)})
	}
	// Three claimed below: two running, one whose lease has expired.
	for i := range 3 {
		specs = append(specs, jobqueue.Spec{Kind: "work", Subject: int64(400 + i), Partition: "claimed", Priority: jobqueue.PriorityHigh})
	}
	insertJobs(t, b, specs...)
	if _, err := b.pool.Exec(context.Background(), `UPDATE jobs SET status = 'PROCESSING', claim_token = gen_random_uuid(),
		claimed_by = 'test', lease_until = statement_timestamp() + CASE WHEN subject_id = 400 THEN interval '-1 second' ELSE interval '1 minute' END
		WHERE partition_key = 'claimed'`); err != nil {
		t.Fatal(err)
	}

	kinds := kindsOf(t, client, base, adminToken(t, 1, true))
	if len(kinds) != 2 {
		t.Fatalf("kinds listed: %v, want work and idle", kinds)
	}
	work := kinds["work"]
	if work.Paused || work.PausedAt != nil || work.PausedBy != nil || work.MaxRunning != 3 || work.Running != 2 || work.Pending != 19 {
		t.Errorf("work: %+v, want not paused, limit 3, 2 running, 19 pending", work)
	}
	if p := work.Priorities; p != (jobqueue.PriorityCounts{High: 3, Normal: 11, Low: 5}) {
		t.Errorf("work's priorities: %+v, want 3 high, 11 normal, 5 low", p)
	}
	want := []jobqueue.PartitionBacklog{{Partition: "41", Pending: 5}, {Partition: "", Pending: 3}}
	for i := range 8 {
		want = append(want, jobqueue.PartitionBacklog{Partition: fmt.Sprintf("p%02d", i), Pending: 1})
	}
	if fmt.Sprint(work.Partitions) != fmt.Sprint(want) {
		t.Errorf("work's partitions: %v, want %v", work.Partitions, want)
	}
	idle := kinds["idle"]
	if idle.MaxRunning != 0 || idle.Running != 0 || idle.Pending != 0 || idle.Partitions == nil || len(idle.Partitions) != 0 {
		t.Errorf("idle: %+v, want zeros and an empty partition list", idle)
	}
}

// TestAdminKinds_PauseStopsClaimsUntilResumed: a pause through the route is recorded with its
// administrator and stops the kind's claims (and only that kind's); a second pause keeps the
// first; a resume lets the claims take the jobs again, and a second resume changes nothing.
func TestAdminKinds_PauseStopsClaimsUntilResumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil), mediaKind("other", nil))
	base := kindsServer(t, q)
	client := &http.Client{Timeout: 10 * time.Second}
	insertJobs(t, b, jobqueue.Spec{Kind: "work", Subject: 1}, jobqueue.Spec{Kind: "work", Subject: 2},
		jobqueue.Spec{Kind: "other", Subject: 3})
	ctx := context.Background()

	paused := kindAction(t, client, base, adminToken(t, 7, true), "work", "pause")
	if !paused.Paused || paused.PausedAt == nil || paused.PausedBy == nil || *paused.PausedBy != "member 7" || paused.Pending != 2 {
		t.Fatalf("the pause answered %+v, want work paused by member 7 with 2 pending", paused)
	}
	if jobs, err := q.Claim(ctx, "work", 10, "node"); err != nil || len(jobs) != 0 {
		t.Fatalf("a claim of the paused kind took %d jobs (%v), want none", len(jobs), err)
	}
	if jobs, err := q.Claim(ctx, "other", 10, "node"); err != nil || len(jobs) != 1 {
		t.Fatalf("a claim of another kind took %d jobs (%v), want its 1", len(jobs), err)
	}
	again := kindAction(t, client, base, adminToken(t, 8, true), "work", "pause")
	if !again.Paused || !again.PausedAt.Equal(*paused.PausedAt) || *again.PausedBy != "member 7" {
		t.Errorf("a second pause answered %+v, want the first pause kept (member 7 at %v)", again, *paused.PausedAt)
	}
	if k := kindsOf(t, client, base, adminToken(t, 1, true))["work"]; !k.Paused || *k.PausedBy != "member 7" {
		t.Errorf("the list shows work as %+v, want paused by member 7", k)
	}

	resumed := kindAction(t, client, base, adminToken(t, 7, true), "work", "resume")
	if resumed.Paused || resumed.PausedAt != nil || resumed.PausedBy != nil {
		t.Errorf("the resume answered %+v, want work not paused", resumed)
	}
	if jobs, err := q.Claim(ctx, "work", 10, "node"); err != nil || len(jobs) != 2 {
		t.Errorf("a claim after the resume took %d jobs (%v), want both", len(jobs), err)
	}
	if again := kindAction(t, client, base, adminToken(t, 7, true), "work", "resume"); again.Paused {
		t.Errorf("a second resume answered %+v", again)
	}
}

// TestAdminKinds_RefusedWithJSON: the kinds' routes refuse a member and an anonymous client,
// and a kind this node does not know (in any spelling a path can carry) is 404 JSON, never a
// 500, and leaves no pause behind.
func TestAdminKinds_RefusedWithJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue(t, b.pool, time.Minute, mediaKind("work", nil))
	base := kindsServer(t, q)
	client := &http.Client{Timeout: 10 * time.Second}
	admin, member := adminToken(t, 1, true), adminToken(t, 2, false)
	type tc struct {
		method, path, tok string
		want              int
	}
	cases := []tc{
		{"GET", "/v1/admin/jobs/kinds", member, http.StatusForbidden},
		{"GET", "/v1/admin/jobs/kinds", "", http.StatusUnauthorized},
	}
	for _, action := range []string{"pause", "resume"} {
		cases = append(cases,
			tc{"POST", "/v1/admin/jobs/kinds/work/" + action, member, http.StatusForbidden},
			tc{"POST", "/v1/admin/jobs/kinds/work/" + action, "", http.StatusUnauthorized},
			tc{"GET", "/v1/admin/jobs/kinds/work/" + action, admin, http.StatusMethodNotAllowed})
		for _, kind := range []string{"nope", "WORK", "work%20", "%00", "%FF", "..", "%2e%2e", "work%2f..", "%27%3B--", strings.Repeat("w", 1000)} {
			cases = append(cases, tc{"POST", "/v1/admin/jobs/kinds/" + kind + "/" + action, admin, http.StatusNotFound})
		}
	}
	for _, c := range cases {
		status, body, err := adminDo(t, client, c.method, base+c.path, c.tok)
		if err != nil {
			t.Errorf("%s %.80s: %v", c.method, c.path, err)
			continue
		}
		var e struct {
			Error string `json:"error"`
		}
		if status != c.want || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
			t.Errorf("%s %.80s = %d %s, want %d with JSON {\"error\": ...}", c.method, c.path, status, body, c.want)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM job_kind_pauses`); n != 0 {
		t.Errorf("%d pauses recorded by refused requests", n)
	}
}

// TestMetrics_PausedRunningAndLimit: playhead_jobs_paused says which kinds are paused,
// playhead_jobs_running counts the jobs under a live lease (not one whose lease expired), and playhead_jobs_max_running
// gives each kind's limit, read at scrape time.
func TestMetrics_PausedRunningAndLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	limited := mediaKind("work", nil)
	limited.MaxRunning = 2
	q := newQueue(t, b.pool, time.Minute, limited, mediaKind("other", nil))
	reg := prometheus.NewRegistry()
	jobqueue.NewMetrics(reg, q)
	insertJobs(t, b, jobqueue.Spec{Kind: "work", Subject: 1}, jobqueue.Spec{Kind: "work", Subject: 2}, jobqueue.Spec{Kind: "other", Subject: 3})
	ctx := context.Background()
	if jobs, err := q.Claim(ctx, "work", 1, "node"); err != nil || len(jobs) != 1 {
		t.Fatalf("claimed %d (%v)", len(jobs), err)
	}
	// The other job of work is PROCESSING under a lease that has expired: its worker is gone,
	// so it holds no slot of the limit and is not running.
	if _, err := b.pool.Exec(ctx, `UPDATE jobs SET status = 'PROCESSING', claim_token = gen_random_uuid(),
		claimed_by = 'gone', lease_until = statement_timestamp() - interval '1 second' WHERE kind = 'work' AND status = 'PENDING'`); err != nil {
		t.Fatal(err)
	}
	if err := q.Pause(ctx, "other", "test"); err != nil {
		t.Fatal(err)
	}
	gauges := func() map[string]float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if g := m.GetGauge(); g != nil && len(m.GetLabel()) == 1 {
					out[f.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = g.GetValue()
				}
			}
		}
		return out
	}
	got := gauges()
	want := map[string]float64{
		"playhead_jobs_paused{work}": 0, "playhead_jobs_paused{other}": 1,
		"playhead_jobs_running{work}": 1, "playhead_jobs_running{other}": 0,
		"playhead_jobs_max_running{work}": 2, "playhead_jobs_max_running{other}": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (reported: %t), want %v", k, g, ok, v)
		}
	}
	if err := q.Resume(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if g := gauges()["playhead_jobs_paused{other}"]; g != 0 {
		t.Errorf("after the resume playhead_jobs_paused{other} = %v, want 0", g)
	}
}
