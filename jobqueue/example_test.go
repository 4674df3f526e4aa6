package jobqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

// databaseURL is a database with Playhead's schema (migrations.Up) for the examples. An
// Example has no *testing.T to ask pgtest for a database of its own, so they share one that
// pgtest creates on first use and drops once the package's tests have passed.
func databaseURL() string {
	url, err := pgtest.ExampleURL()
	if err != nil {
		log.Fatal(err)
	}
	return url
}

// A kind registered with a Queue, a Runner that runs its jobs, and a job enqueued inside the
// transaction of the change it belongs to.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	completed := make(chan string, 1)
	greet := jobqueue.Kind{
		Name: "example_greet",
		// Run does the work outside any transaction, then says what to write in the fenced
		// completion (Commit, nothing here) and what to do once it has committed.
		Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			greeting := fmt.Sprintf("hello, subject %d (attempt %d of %d)", j.Subject, j.Attempt, j.MaxAttempts)
			return jobqueue.Result{
				Committed: func(context.Context) error {
					completed <- greeting
					return nil
				},
			}, nil
		},
	}
	// A node registers every kind it runs, or whose jobs it may rescue or retry.
	q, err := jobqueue.NewQueue(pool, time.Minute, greet)
	if err != nil {
		log.Fatal(err)
	}
	// One runner per kind a node runs. A node also wakes its runners on the notifications of
	// jobqueue.Channel (notify.Listener); here the runner only polls.
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{
		Kind:         greet.Name,
		Node:         "example-node",
		Concurrency:  2,
		PollInterval: 50 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer r.Stop(ctx)

	// The job exists exactly when the transaction that enqueues it commits, with the change
	// it belongs to (an uploaded media row, say).
	var id int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		id, err = jobqueue.Enqueue(ctx, tx, greet.Name, 42, 3)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println(<-completed)
	job, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Kind, job.Status)
	// Output:
	// hello, subject 42 (attempt 1 of 3)
	// example_greet COMPLETED
}

// A group: two jobs that can run at once and a third that waits for both. The third is
// WAITING, never claimed, until the completion of its last parent makes it PENDING.
func ExampleEnqueueGroup() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	var mu sync.Mutex
	var fetched []string
	fetch := jobqueue.Kind{
		Name: "example_fetch",
		Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			var args struct{ Part string }
			if err := json.Unmarshal(j.Args, &args); err != nil {
				return jobqueue.Result{}, jobqueue.Permanent(err) // retrying cannot help
			}
			mu.Lock()
			fetched = append(fetched, args.Part)
			mu.Unlock()
			return jobqueue.Result{}, nil
		},
	}
	combined := make(chan []string, 1)
	combine := jobqueue.Kind{
		Name: "example_combine",
		Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			mu.Lock()
			parts := slices.Sorted(slices.Values(fetched))
			mu.Unlock()
			combined <- parts
			return jobqueue.Result{}, nil
		},
	}
	q, err := jobqueue.NewQueue(pool, time.Minute, fetch, combine)
	if err != nil {
		log.Fatal(err)
	}
	for _, kind := range []string{fetch.Name, combine.Name} {
		r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{
			Kind: kind, Node: "example-node", Concurrency: 2,
			PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			log.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			log.Fatal(err)
		}
		defer r.Stop(ctx)
	}

	// After names earlier jobs of the same call, by index: the group cannot hold a cycle.
	const document = 7 // the row the jobs are about
	var ids []int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		ids, err = jobqueue.EnqueueGroup(ctx, tx, []jobqueue.GroupJob{
			{Kind: fetch.Name, Subject: document, Args: json.RawMessage(`{"part": "outro"}`), MaxAttempts: 3},
			{Kind: fetch.Name, Subject: document, Args: json.RawMessage(`{"part": "intro"}`), MaxAttempts: 3},
			{Kind: combine.Name, Subject: document, MaxAttempts: 3, After: []int{0, 1}},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println("combined after fetching", <-combined)
	last, err := q.Get(ctx, ids[2])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("its parents:", len(last.Parents), "group:", *last.GroupID == ids[0])
	// Output:
	// combined after fetching [intro outro]
	// its parents: 2 group: true
}

// A periodic kind: a Scheduler enqueues one job per run time of its schedule for the whole
// cluster, however many nodes run a Scheduler, and the job runs like any other.
func ExampleScheduler() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	everySecond, err := jobqueue.Every(time.Second)
	if err != nil {
		log.Fatal(err)
	}
	runTimes := make(chan time.Time, 1)
	tick := jobqueue.Kind{
		Name:     "example_tick",
		Periodic: &jobqueue.Periodic{Schedule: everySecond, MaxAttempts: 2},
		Run: func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			select {
			case runTimes <- jobqueue.RunTime(j): // the run time the job stands for
			default: // the example reads the first one only
			}
			return jobqueue.Result{}, nil
		},
	}
	q, err := jobqueue.NewQueue(pool, time.Minute, tick)
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	s := jobqueue.NewScheduler(q, jobqueue.SchedulerConfig{Interval: 50 * time.Millisecond, Logger: quiet})
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: tick.Name, Node: "example-node", PollInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	for _, start := range []func(context.Context) error{s.Start, r.Start} {
		if err := start(ctx); err != nil {
			log.Fatal(err)
		}
	}
	defer s.Stop(ctx)
	defer r.Stop(ctx)

	runTime := <-runTimes
	fmt.Println("ran at a whole second:", runTime.Equal(runTime.Truncate(time.Second)))
	schedules, err := q.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, row := range schedules {
		fmt.Println(row.Kind, row.Schedule)
	}
	// Output:
	// ran at a whole second: true
	// example_tick every 1s
}
