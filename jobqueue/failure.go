package jobqueue

import (
	"errors"
	"time"
)

// GenericReason is what a job's owner (a media's uploader) is told when the job failed for a
// reason nobody worded for them.
const GenericReason = "processing failed; an administrator can see why"

// reasonError carries the short reason a job's owner sees when it fails for good.
type reasonError struct {
	reason string
	err    error
}

func (r reasonError) Error() string { return r.err.Error() }
func (r reasonError) Unwrap() error { return r.err }

// WithReason marks err with reason, the short, user-facing explanation a kind's Fail hook shows
// (a media's failure_reason: "not a playable video", "too large: …"). The error's own text —
// ffprobe's stderr with server paths, a remote address — stays in the job row (last_error) and
// the log, for administrators.
func WithReason(err error, reason string) error { return reasonError{reason: reason, err: err} }

// ReasonOf returns the reason of the first WithReason error in err's chain, or GenericReason.
func ReasonOf(err error) string {
	if r, ok := errors.AsType[reasonError](err); ok {
		return r.reason
	}
	return GenericReason
}

// retryAfterError asks for the next attempt no sooner than after.
type retryAfterError struct {
	after time.Duration
	err   error
}

func (r retryAfterError) Error() string { return r.err.Error() }
func (r retryAfterError) Unwrap() error { return r.err }

// RetryAfter marks a retryable err with the delay a server asked for before the next attempt
// (its Retry-After). The runner waits that long, capped by RetryCap, instead of its backoff.
func RetryAfter(err error, after time.Duration) error {
	return retryAfterError{after: after, err: err}
}

// retryAfterOf returns the delay of the first RetryAfter in err's chain, or 0.
func retryAfterOf(err error) time.Duration {
	if r, ok := errors.AsType[retryAfterError](err); ok {
		return r.after
	}
	return 0
}
