// Package backoff computes retry delays: exponential with full jitter, capped (the AWS
// architecture blog's "full jitter"), so that many clients retrying at once spread out.
package backoff

import (
	"math/rand/v2"
	"time"
)

// maxShift caps the exponent: 2^30 times any sane base is already past every cap, and a
// larger shift would overflow time.Duration for a large attempt count.
const maxShift = 30

// Ceiling returns the upper bound of the delay before retry number attempt (1 for the first
// retry): base·2^(attempt−1), capped at limit.
func Ceiling(attempt int, base, limit time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	shift := min(attempt-1, maxShift)
	c := base << shift
	if c <= 0 || c > limit { // c <= 0: overflowed
		return limit
	}
	return c
}

// FullJitter returns a delay drawn uniformly from [0, Ceiling(attempt, base, limit)).
func FullJitter(attempt int, base, limit time.Duration) time.Duration {
	c := Ceiling(attempt, base, limit)
	if c <= 0 {
		return 0
	}
	return rand.N(c)
}
