package main

import (
	"math"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestReport_DatabaseAfterTheRamp: the database's figures after the ramp come from the sample
// taken when the ramp ended, over the measured window only; without that sample there are none.
func TestReport_DatabaseAfterTheRamp(t *testing.T) {
	r := newReport(options{players: 20_000})
	r.Elapsed, r.Measured = 90*time.Second, 60*time.Second
	r.Database = &dbFigures{
		before:   dbSample{transactions: 100, rows: 1_000, cpu: 10},
		ramped:   dbSample{transactions: 20_000, rows: 60_000, cpu: 21},
		rampedOK: true,
		after:    dbSample{transactions: 22_000, rows: 300_000, cpu: 27},
	}
	r.finish()
	h := r.Database.Held
	if h == nil {
		t.Fatal("no figures after the ramp")
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9*math.Abs(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("rows/s", h.RowsPerSec, 240_000.0/60)
	near("CPU s", h.CPUSeconds, 6)
	near("µs per row", h.CPUPerRowUS, 6/240_000.0*1e6)
	near("cores", h.Cores, 0.1)
	near("players per core", h.PlayersPerCore, 200_000)
	// The whole run's figures are unchanged by it.
	near("whole-run µs per row", r.Database.CPUPerRowUS, 17/299_000.0*1e6)

	r.Database = &dbFigures{before: r.Database.before, after: r.Database.after}
	r.finish()
	if r.Database.Held != nil {
		t.Errorf("figures after the ramp without a sample at its end: %+v", *r.Database.Held)
	}
}

// TestReport_RefusedByKey: a 401 is counted under the key of the token it refused, with the
// first and last moments one was sent; other answers are not.
func TestReport_RefusedByKey(t *testing.T) {
	r := newReport(options{players: 2})
	r.Start = time.Unix(1_800_000_000, 0)
	answer := func(status int, rotated bool, at time.Duration) {
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseResponse(resp)
		resp.SetStatusCode(status)
		r.record(request{op: opPut, rotated: rotated, created: r.Start.Add(at)}, nil, resp)
	}
	answer(fasthttp.StatusNoContent, false, time.Second)
	answer(fasthttp.StatusUnauthorized, false, 3*time.Second)
	answer(fasthttp.StatusUnauthorized, true, 7*time.Second)
	answer(fasthttp.StatusUnauthorized, true, 5*time.Second)
	answer(fasthttp.StatusTooManyRequests, true, 9*time.Second)
	if want := (refusals{FirstKey: 1, RotatedKey: 2, First: 3 * time.Second, Last: 7 * time.Second}); r.Refused != want {
		t.Fatalf("refused = %+v, want %+v", r.Refused, want)
	}
}
