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
