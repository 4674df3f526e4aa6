package jobqueue

import (
	"testing"
	"time"
)

// The run time due is the latest one after the last run and not after now; the earlier ones
// missed are counted as skipped; an interval is aligned to the clock, not to when a node
// started; a schedule far behind jumps to the last day of run times.
func TestDueRunTime(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	minute, err := Every(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := Every(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	daily, err := Cron("30 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		s           Schedule
		last, now   string
		due         string // "" when none is due
		skipped     int64
		exactlySkip bool
	}{
		{"not yet", minute, "2026-12-03T10:00:00Z", "2026-12-03T10:00:59Z", "", 0, true},
		{"on the minute", minute, "2026-12-03T10:00:00Z", "2026-12-03T10:01:00Z", "2026-12-03T10:01:00Z", 0, true},
		{"first seen mid-minute", minute, "2026-12-03T10:00:17Z", "2026-12-03T10:01:02Z", "2026-12-03T10:01:00Z", 0, true},
		{"four missed", minute, "2026-12-03T10:00:00Z", "2026-12-03T10:05:30Z", "2026-12-03T10:05:00Z", 4, true},
		{"cron, one day missed", daily, "2026-12-01T04:00:00Z", "2026-12-03T05:00:00Z", "2026-12-03T03:30:00Z", 1, true},
		{"cron, before its time", daily, "2026-12-03T03:30:00Z", "2026-12-04T03:29:59Z", "", 0, true},
		{"far behind jumps", hourly, "2026-11-20T00:00:00Z", "2026-12-03T10:20:00Z", "2026-12-03T10:00:00Z", 1, false},
	} {
		due, skipped, ok := dueRunTime(c.s, at(c.last), at(c.now))
		switch {
		case c.due == "" && ok:
			t.Errorf("%s: due %s, want none", c.name, due)
		case c.due == "":
		case !ok || !due.Equal(at(c.due)):
			t.Errorf("%s: due %s (%v), want %s", c.name, due, ok, c.due)
		case c.exactlySkip && skipped != c.skipped, !c.exactlySkip && skipped < c.skipped:
			t.Errorf("%s: skipped %d, want %d", c.name, skipped, c.skipped)
		}
	}
	if _, err := Every(500 * time.Millisecond); err == nil {
		t.Error("Every(500ms) accepted")
	}
	if _, err := Cron("every day"); err == nil {
		t.Error("a cron expression that is not one accepted")
	}
}
