package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/playhead/playhead/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop_StartStop(t *testing.T) {
	var l lifecycle.Loop
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start = %v, want nil", err)
	}
	if err := l.Start(context.Background(), func(context.Context) {}); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}

	var l2 lifecycle.Loop
	runs := make(chan error, 2)
	run := func(ctx context.Context) { <-ctx.Done(); runs <- context.Cause(ctx) }
	// The start context's cancellation is not a stop: only Stop ends the loop.
	startCtx, cancel := context.WithCancel(context.Background())
	if err := l2.Start(startCtx, run); err != nil {
		t.Fatal(err)
	}
	if err := l2.Start(startCtx, run); err != nil {
		t.Fatalf("second Start = %v, want a no-op", err)
	}
	cancel()
	if err := l2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cause := <-runs; !errors.Is(cause, lifecycle.ErrStopped) {
		t.Fatalf("the loop ended with %v, want ErrStopped", cause)
	}
	if len(runs) != 0 {
		t.Fatal("the second Start ran the function again")
	}
	if err := l2.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v, want nil", err)
	}
}

// A Stop whose deadline passes first returns the deadline's error; a later Stop still waits.
// TestLoop_Every: the tick runs again and again until Stop; Stop cancels the running tick's
// ctx and returns only once it has returned; no tick runs after Stop.
func TestLoop_Every(t *testing.T) {
	var l lifecycle.Loop
	ticks := make(chan struct{})
	var inTick, ended atomic.Bool
	err := l.Every(context.Background(), time.Millisecond, func(ctx context.Context) {
		if ended.Load() {
			t.Error("a tick ran after Stop returned")
		}
		inTick.Store(true)
		defer inTick.Store(false)
		select {
		case ticks <- struct{}{}:
		case <-ctx.Done(): // Stop while this tick waits to be counted
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-ticks
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended.Store(true)
	if inTick.Load() {
		t.Error("Stop returned while a tick was still running")
	}
}

func TestLoop_StopDeadline(t *testing.T) {
	var l lifecycle.Loop
	release := make(chan struct{})
	if err := l.Start(context.Background(), func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Stop(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an expired context = %v, want its error", err)
	}
	close(release)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type recorder struct {
	name  string
	log   *[]string
	fails bool
}

func (r recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	if r.fails {
		return errors.New("broken")
	}
	return nil
}

func (r recorder) Stop(context.Context) error {
	*r.log = append(*r.log, "stop "+r.name)
	if r.name == "b" {
		return errors.New("stuck")
	}
	return nil
}

// A failed start leaves the services after it unstarted; Stop stops every service in reverse,
// never-started ones included, and names the ones that failed.
func TestGroup_StartInOrderStopInReverse(t *testing.T) {
	var log []string
	var g lifecycle.Group
	g.Add("a", recorder{name: "a", log: &log})
	g.Add("b", recorder{name: "b", log: &log})
	g.Add("c", recorder{name: "c", log: &log, fails: true})
	g.Add("d", recorder{name: "d", log: &log})
	err := g.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start c") {
		t.Fatalf("Start = %v, want c's failure named", err)
	}
	err = g.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "stop b: stuck") {
		t.Fatalf("Stop = %v, want b's failure named", err)
	}
	want := []string{"start a", "start b", "start c", "stop d", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("calls %v, want %v", log, want)
	}
}
