package backoff_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/backoff"
)

func TestCeiling_DoublesUpToTheCap(t *testing.T) {
	base, limit := time.Second, 30*time.Second
	prev := time.Duration(0)
	for attempt := 1; attempt <= 200; attempt++ {
		c := backoff.Ceiling(attempt, base, limit)
		switch {
		case c > limit:
			t.Fatalf("attempt %d: ceiling %v over the cap %v", attempt, c, limit)
		case prev != 0 && prev < limit && c != min(2*prev, limit):
			t.Fatalf("attempt %d: ceiling %v, want double of %v (capped)", attempt, c, prev)
		case c <= 0:
			t.Fatalf("attempt %d: ceiling %v is not positive (overflow)", attempt, c)
		}
		prev = c
	}
	if c := backoff.Ceiling(1, base, limit); c != base {
		t.Fatalf("first retry ceiling %v, want the base %v", c, base)
	}
}

func TestFullJitter_StaysWithinCeiling(t *testing.T) {
	base, limit := time.Second, 30*time.Second
	for attempt := 1; attempt <= 64; attempt++ {
		ceiling := backoff.Ceiling(attempt, base, limit)
		var sum time.Duration
		const draws = 2000
		for range draws {
			d := backoff.FullJitter(attempt, base, limit)
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d: delay %v outside [0, %v)", attempt, d, ceiling)
			}
			sum += d
		}
		// The mean of a uniform draw is ceiling/2; 2000 draws land well within ±15%.
		mean := sum / draws
		if mean < ceiling*35/100 || mean > ceiling*65/100 {
			t.Fatalf("attempt %d: mean delay %v is not near half the ceiling %v: not uniform", attempt, mean, ceiling)
		}
	}
}

func TestDelay_RetryAfterOverridesAndIsCapped(t *testing.T) {
	base, limit := time.Second, 30*time.Second
	for attempt := 1; attempt <= 10; attempt++ {
		if d := backoff.Delay(attempt, base, limit, 7*time.Second); d != 7*time.Second {
			t.Fatalf("attempt %d: Retry-After 7s gave %v", attempt, d)
		}
		if d := backoff.Delay(attempt, base, limit, time.Hour); d != limit {
			t.Fatalf("attempt %d: Retry-After 1h gave %v, want the cap %v", attempt, d, limit)
		}
		for range 500 {
			if d := backoff.Delay(attempt, base, limit, 0); d < 0 || d >= backoff.Ceiling(attempt, base, limit) {
				t.Fatalf("attempt %d: no Retry-After gave %v outside the jitter range", attempt, d)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	for header, want := range map[string]time.Duration{
		"1": time.Second, " 120 ": 2 * time.Minute, "0": 0, "-5": 0, "": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "1.5": 0, "99999999": 24 * time.Hour,
	} {
		if got := backoff.ParseRetryAfter(header); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", header, got, want)
		}
	}
}
