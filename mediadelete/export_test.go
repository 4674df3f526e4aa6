package mediadelete

import "github.com/playhead/playhead/jobqueue"

// PlaybackBatch is playbackBatch, for the plan test.
const PlaybackBatch = playbackBatch

// DeletePlaybackBatchSQL is deletePlaybackBatchSQL, for the plan test.
const DeletePlaybackBatchSQL = deletePlaybackBatchSQL

// CompletionStatements are the completion's statements with their arguments for j, for the
// plan test.
func CompletionStatements(j jobqueue.Job) (sqls []string, args [][]any) {
	for _, st := range deleteRowsSQL {
		a := []any{j.Subject}
		if st.args != nil {
			a = append(a, st.args(j)...)
		}
		sqls, args = append(sqls, st.sql), append(args, a)
	}
	return sqls, args
}

// DeleteRows is the deletion job's completion (deleteRows), for tests that hold it open.
var DeleteRows = deleteRows
