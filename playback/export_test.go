package playback

// ParsePositionJSON exposes the encoding/json reader, the reference the plain reader must agree
// with.
var ParsePositionJSON = parsePositionJSON

// ListSQL lets the plan test explain the list statement the store runs.
const ListSQL = listSQL

// UpsertConflictSQL and KeepLastFinishedSQL let BenchmarkUpsert build its candidate flush
// statements with the production rules.
const (
	UpsertConflictSQL   = upsertConflictSQL
	KeepLastFinishedSQL = keepLastFinishedSQL
)
