package playback

import "time"

// ParseReportJSON exposes the encoding/json reader, the reference the plain reader must agree
// with.
var ParseReportJSON = parseReportJSON

// ListSQL lets the plan test explain the list statement the store runs.
const ListSQL = listSQL

// UpsertConflictSQL and KeepLastFinishedSQL let BenchmarkUpsert build its candidate flush
// statements with the production rules.
const (
	UpsertConflictSQL   = upsertConflictSQL
	KeepLastFinishedSQL = keepLastFinishedSQL
)

// SetForgetWait sets how long Forget waits for the writers in flight (ForgetWait).
func (s *Store) SetForgetWait(d time.Duration) { s.forgetWait = d }
