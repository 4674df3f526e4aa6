package httpserver

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Sampler lets the first event of a kind through and then at most one per interval, counting
// the ones it held back: a flood of one failure (a client hammering a broken route, a database
// outage seen by every request) costs a log line per interval instead of one per request.
// It is safe for concurrent use.
type Sampler struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*sampled
}

type sampled struct {
	last       time.Time
	suppressed int
}

// maxSampledKinds bounds the kinds remembered. Kinds are route patterns and statuses, so there
// are few; past the bound the memory is dropped, which costs at most one extra line per kind.
const maxSampledKinds = 1024

// NewSampler returns a Sampler that lets one event of each kind through per interval.
func NewSampler(every time.Duration) *Sampler {
	return &Sampler{every: every, now: time.Now, kinds: map[string]*sampled{}}
}

// Allow reports whether an event of kind should be logged now and, when it should, how many
// events of that kind were held back since the last one logged.
func (s *Sampler) Allow(kind string) (ok bool, suppressed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	k, seen := s.kinds[kind]
	if !seen {
		if len(s.kinds) >= maxSampledKinds {
			clear(s.kinds)
		}
		s.kinds[kind] = &sampled{last: now}
		return true, 0
	}
	if now.Sub(k.last) < s.every {
		k.suppressed++
		return false, 0
	}
	suppressed = k.suppressed
	k.last, k.suppressed = now, 0
	return true, suppressed
}

// maxLoggedBytes bounds what one request may put into a log line (its path, an error text).
const maxLoggedBytes = 256

// truncate cuts s to maxLoggedBytes, at a rune boundary, saying how much was cut.
func truncate(s string) string {
	if len(s) <= maxLoggedBytes {
		return s
	}
	cut := maxLoggedBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "?") + fmt.Sprintf("…(%d more bytes)", len(s)-cut)
}
