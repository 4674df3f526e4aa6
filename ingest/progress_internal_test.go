package ingest

import (
	"testing"
	"time"
)

// TestProgress: counts by state, the rows still on their way, and an estimate from the pace so
// far: none before a row has finished, 0 once nothing remains.
func TestProgress(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rows := func(states ...RowState) []RowStatus {
		out := make([]RowStatus, len(states))
		for i, s := range states {
			out[i].State = s
		}
		return out
	}
	p := progress(rows(StateReady, StateFailed, StatePending, StateIngesting, StateUploaded, StateRejected), created, created.Add(2*time.Minute))
	if p.Counts[StateReady] != 1 || p.Counts[StateFailed] != 1 || p.Counts[StatePending] != 1 || p.Counts[StateRejected] != 1 || p.Remaining != 3 {
		t.Fatalf("progress = %+v", p)
	}
	// Two rows finished in 120 s: 60 s a row, 3 rows left.
	if p.EstimatedSecondsLeft == nil || *p.EstimatedSecondsLeft != 180 {
		t.Fatalf("estimate = %v, want 180 s", p.EstimatedSecondsLeft)
	}
	if p := progress(rows(StatePending, StatePending), created, created.Add(time.Minute)); p.EstimatedSecondsLeft != nil || p.Remaining != 2 {
		t.Fatalf("nothing finished yet: %+v, want no estimate", p)
	}
	if p := progress(rows(StateReady, StateRejected), created, created.Add(time.Minute)); p.EstimatedSecondsLeft == nil || *p.EstimatedSecondsLeft != 0 || p.Remaining != 0 {
		t.Fatalf("all done: %+v, want 0 s left", p)
	}
}
