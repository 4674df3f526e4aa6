package ratelimit

import (
	"testing"
	"time"
)

// fakeClock drives the limiter without sleeping.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestLimiter(rate float64, burst int) (*Limiter, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	l := New(rate, burst)
	l.now = c.now
	return l, c
}

func TestLimiter_BurstThenSustainedRate(t *testing.T) {
	l, clock := newTestLimiter(2, 5) // 2/s, burst 5
	for i := range 5 {
		if ok, _ := l.Allow(7); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow(7)
	if ok || wait <= 0 || wait > 500*time.Millisecond {
		t.Fatalf("6th request = %v, wait %v; want refused with a wait of at most one interval", ok, wait)
	}
	// Another key is not affected.
	if ok, _ := l.Allow(8); !ok {
		t.Fatal("a different key was limited")
	}
	// Over 10 s at exactly the sustained rate, every request passes.
	clock.advance(wait)
	for i := range 20 {
		if ok, w := l.Allow(7); !ok {
			t.Fatalf("sustained request %d refused (wait %v)", i, w)
		}
		clock.advance(500 * time.Millisecond)
	}
	// Faster than the rate, about half are refused.
	refused := 0
	for range 40 {
		if ok, _ := l.Allow(7); !ok {
			refused++
		}
		clock.advance(250 * time.Millisecond)
	}
	if refused < 15 || refused > 25 {
		t.Fatalf("at twice the rate %d of 40 were refused, want about half", refused)
	}
}

func TestLimiter_SweepForgetsIdleKeys(t *testing.T) {
	l, clock := newTestLimiter(1, 3)
	for k := range int64(1000) {
		l.Allow(k)
	}
	if n := l.Sweep(); n != 0 {
		t.Fatalf("swept %d keys still in debt", n)
	}
	clock.advance(2 * time.Second)
	if n := l.Sweep(); n != 1000 {
		t.Fatalf("swept %d idle keys, want 1000", n)
	}
	// A forgotten key starts again at full burst.
	for i := range 3 {
		if ok, _ := l.Allow(5); !ok {
			t.Fatalf("request %d after a sweep refused", i)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
