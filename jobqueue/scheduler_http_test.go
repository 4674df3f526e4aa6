package jobqueue_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/jobqueue"
)

// GET /v1/admin/jobs/schedules: 401 JSON without a token, 403 JSON for a member, and for an
// admin the schedules with the fields the OpenAPI description names (last_job_id and next_run
// left out while there are none, never a year-1 time).
func TestAdmin_SchedulesRouteOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	never, err := jobqueue.Cron("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	every, err := jobqueue.Every(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, b.pool, time.Minute,
		jobqueue.Kind{Name: "never", Periodic: &jobqueue.Periodic{Schedule: never}},
		jobqueue.Kind{Name: "tick", Periodic: &jobqueue.Periodic{Schedule: every}})
	base := adminServer(t, q)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range []struct {
		who    string
		tok    string
		status int
	}{{"anonymous", "", 401}, {"member", adminToken(t, 2, false), 403}} {
		status, body, err := adminDo(t, client, "GET", base+"/v1/admin/jobs/schedules", c.tok)
		if err != nil || status != c.status || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %q %v, want %d with JSON", c.who, status, body, err, c.status)
		}
	}
	s := jobqueue.NewScheduler(q, jobqueue.SchedulerConfig{Interval: 20 * time.Millisecond, Logger: quiet})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	waitFor(t, "a tick job", func() bool { return b.count(t, `SELECT count(*) FROM jobs WHERE kind = 'tick'`) > 0 })
	status, body, err := adminDo(t, client, "GET", base+"/v1/admin/jobs/schedules", adminToken(t, 1, true))
	if err != nil || status != 200 {
		t.Fatalf("admin: %d %q %v", status, body, err)
	}
	var got struct {
		Schedules []map[string]any `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Schedules) != 2 {
		t.Fatalf("schedules %s, want never and tick", body)
	}
	allowed := map[string]bool{"kind": true, "schedule": true, "last_run": true, "last_job_id": true, "next_run": true, "skipped": true}
	for _, row := range got.Schedules {
		for f := range row {
			if !allowed[f] {
				t.Errorf("field %q not in the OpenAPI schema: %v", f, row)
			}
		}
	}
	neverRow, tickRow := got.Schedules[0], got.Schedules[1]
	if _, ok := neverRow["next_run"]; ok || neverRow["schedule"] != "0 0 30 2 *" {
		t.Errorf("never-firing schedule listed as %v, want no next_run", neverRow)
	}
	if _, ok := tickRow["last_job_id"]; !ok || tickRow["schedule"] != "every 1s" {
		t.Errorf("tick listed as %v, want its last job", tickRow)
	}
}
