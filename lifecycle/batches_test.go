package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/playhead/playhead/lifecycle"
)

// TestBatches_DrainsABacklogThenWaitsForWake: full batches run one after another, a short one
// ends the run, an error is reported and ends it too, idle runs after each run, and nothing
// runs again until Wake (the interval is an hour).
func TestBatches_DrainsABacklogThenWaitsForWake(t *testing.T) {
	const size = 10
	backlog := make(chan int, 100) // what each call answers, in order
	for _, n := range []int{size, size, 3, size, -1} {
		backlog <- n
	}
	calls := make(chan int, 100) // what each call answered, as the test reads them
	var reported []error
	idles := make(chan int, 10) // the answers left when each run ended
	errFailed := errors.New("batch failed")
	var b lifecycle.Batches
	err := b.Start(context.Background(), time.Hour, size, func(ctx context.Context) (int, error) {
		select {
		case n := <-backlog:
			calls <- n
			if n < 0 {
				return 0, errFailed
			}
			return n, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, func(err error) { reported = append(reported, err) }, func(context.Context) { idles <- len(backlog) })
	if err != nil {
		t.Fatal(err)
	}
	// The first run: two full batches and the short one, which ends it.
	for i, want := range []int{size, size, 3} {
		if got := <-calls; got != want {
			t.Fatalf("call %d answered %d, want %d", i+1, got, want)
		}
	}
	// The run ended there, and the loop waits: nothing more runs until Wake.
	if left := <-idles; left != 2 {
		t.Fatalf("the first run ended with %d answers left, want 2 (it went on after a short batch)", left)
	}
	b.Wake()
	for i, want := range []int{size, -1} {
		if got := <-calls; got != want {
			t.Fatalf("after Wake, call %d answered %d, want %d", i+1, got, want)
		}
	}
	if left := <-idles; left != 0 {
		t.Fatalf("the run after Wake ended with %d answers left, want 0", left)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || !errors.Is(reported[0], errFailed) {
		t.Fatalf("reported %v, want the one failure", reported)
	}
}
