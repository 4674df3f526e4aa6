// Package backoff computes retry delays: exponential with full jitter, capped (the AWS
// architecture blog's "full jitter"), so that many clients retrying at once spread out.
package backoff

import (
	"math/rand/v2"
	"strconv"
	"strings"
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

// Delay is the wait before retry number attempt: the server's Retry-After when it gave one
// (capped at limit: a server asking for an hour does not get to park a worker for an hour),
// otherwise FullJitter.
func Delay(attempt int, base, limit, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, limit)
	}
	return FullJitter(attempt, base, limit)
}

// ParseRetryAfter reads a Retry-After header given in seconds. The HTTP-date form is not
// read (0): parsing it would drag in the clock skew between us and the server, and the
// computed backoff is a safe answer.
func ParseRetryAfter(header string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(header))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(min(secs, 24*3600)) * time.Second
}
