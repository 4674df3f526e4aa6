package jobqueue

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is when a periodic kind runs: Next is its first run time after t.
type Schedule interface {
	Next(t time.Time) time.Time
	// String is how an administrator reads the schedule ("every 10m0s", a cron expression).
	String() string
}

// Periodic makes a kind periodic: a Scheduler enqueues one job of it per run time of
// Schedule, for the whole cluster, each with MaxAttempts attempts (default 3). The job's
// Subject is the run time it stands for (RunTime reads it).
type Periodic struct {
	Schedule    Schedule
	MaxAttempts int
}

// RunTime is the scheduled time a periodic job stands for.
func RunTime(j Job) time.Time { return time.UnixMilli(j.Subject).UTC() }

// Every is the schedule of a run every d, at the multiples of d since the zero time (for a d
// that divides a day, that is from midnight UTC: Every(time.Hour) runs on the hour), so every
// node computes the same run times whatever its start. d is a whole number of seconds, at
// least one: run times are stored to the microsecond and a job names its run time in
// milliseconds, and a run time finer than either would come back from the database as an
// earlier instant, due again (Every(time.Hour/7) would enqueue each run time once per node).
func Every(d time.Duration) (Schedule, error) {
	if d < time.Second || d%time.Second != 0 {
		return nil, fmt.Errorf("jobqueue: a periodic interval must be a whole number of seconds, at least 1s, not %s", d)
	}
	return every(d), nil
}

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.UTC().Truncate(d).Add(d)
}

func (e every) String() string { return "every " + time.Duration(e).String() }

// Cron is the schedule of a standard five-field cron expression ("30 3 * * *": 03:30 UTC every
// day) or a descriptor (@daily, @hourly), read by robfig/cron; times are UTC unless the
// expression starts with CRON_TZ=, and then a daylight-saving change runs a time twice or not
// at all as that zone's clock does ("CRON_TZ=America/New_York 30 1 * * *" runs twice on the
// day the clocks go back, "30 2 * * *" not on the day they go forward). "@every 90s" counts
// from the time it is given, not from the clock: its run times are not aligned (use Every).
func Cron(expr string) (Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: cron expression %q: %w", expr, err)
	}
	return cronSchedule{s: s, expr: expr}, nil
}

type cronSchedule struct {
	s    cron.Schedule
	expr string
}

func (c cronSchedule) Next(t time.Time) time.Time { return c.s.Next(t.UTC()) }
func (c cronSchedule) String() string             { return c.expr }

// catchUpWindow and catchUpSteps bound a cron schedule's walk from its last run to the latest
// run time due: one that missed more than catchUpWindow of runs (every node down) starts its
// walk there, counting what it jumped over as one skipped run time, and one walk takes at
// most catchUpSteps run times (a day of a cron expression is at most 1 440: the bound is a
// safety net).
const (
	catchUpWindow = 24 * time.Hour
	catchUpSteps  = 100_000
)

// dueRunTime is the latest run time of s after last and at or before now, and how many run
// times before it are skipped: only the latest of the run times missed while no node was
// enqueuing runs (River's periodic jobs and cron do the same). The count is exact for Every;
// for a cron schedule more than catchUpWindow behind it counts the last day's and one for all
// before. ok is false when none is due.
func dueRunTime(s Schedule, last, now time.Time) (due time.Time, skipped int64, ok bool) {
	due = s.Next(last)
	if due.IsZero() || due.After(now) {
		return time.Time{}, 0, false
	}
	if e, isEvery := s.(every); isEvery {
		// Aligned run times: the latest and the count are arithmetic, however long the outage.
		d := time.Duration(e)
		latest := now.UTC().Truncate(d)
		return latest, int64(latest.Sub(due) / d), true
	}
	if jump := s.Next(now.Add(-catchUpWindow)); jump.After(due) && !jump.After(now) {
		// Far behind: the run times in between are skipped uncounted, except one for the
		// first of them so the figure is never 0 when some were missed.
		due, skipped = jump, 1
	}
	for range catchUpSteps {
		next := s.Next(due)
		if next.IsZero() || next.After(now) {
			break
		}
		due, skipped = next, skipped+1
	}
	return due, skipped, true
}
