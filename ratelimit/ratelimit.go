// Package ratelimit limits requests per key (a member) with GCRA, the generic cell rate
// algorithm: one timestamp per key, a sustained rate and a burst, no goroutine per key.
package ratelimit

import (
	"math"
	"sync"
	"time"
)

const shards = 64

// Limiter allows each key Rate events per second on average, and up to Burst at once.
type Limiter struct {
	interval time.Duration // time one event "costs"
	window   time.Duration // how far ahead of now a key's debt may run: burst × interval
	now      func() time.Time
	shards   [shards]shard
}

type shard struct {
	mu sync.Mutex
	// tat is each key's theoretical arrival time: when its debt is paid off. A key whose tat
	// is in the past is at full burst, so it can be (and by Sweep is) forgotten.
	tat map[int64]time.Time
	_   [40]byte // keep neighbouring shards' locks off one cache line
}

// New returns a Limiter of rate events per second with the given burst (at least 1).
func New(rate float64, burst int) *Limiter {
	burst = max(burst, 1)
	interval := time.Duration(float64(time.Second) / rate)
	l := &Limiter{interval: interval, window: time.Duration(burst) * interval, now: time.Now}
	for i := range l.shards {
		l.shards[i].tat = map[int64]time.Time{}
	}
	return l
}

// Allow takes one event for key. When it is refused, retryAfter says how long until one
// would be allowed.
func (l *Limiter) Allow(key int64) (ok bool, retryAfter time.Duration) {
	s := &l.shards[uint64(key)%shards]
	now := l.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	tat := s.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(l.interval)
	if wait := next.Sub(now) - l.window; wait > 0 {
		return false, wait
	}
	s.tat[key] = next
	return true, 0
}

// Sweep forgets keys that are back at full burst. Run it now and then so a million members
// who each sent one request do not stay in memory.
func (l *Limiter) Sweep() int {
	now := l.now()
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, tat := range s.tat {
			if !tat.After(now) {
				delete(s.tat, k)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// RetryAfterSeconds rounds a wait up to whole seconds for a Retry-After header (at least 1).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
