package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
)

// A kind added to jobKinds, and nowhere else, is known everywhere the node uses kinds: a
// worker node runs its jobs (its runner woken by the job channel's notification: the poll
// interval is an hour), its concurrency is in the worker pool's size, and an api node's queue
// has its hooks (an admin retry of its DEAD job goes through its Revive); a periodic kind's
// jobs are enqueued by the worker node's scheduler. Not parallel: the
// test changes the package's table.
func TestJobKinds_AKindIsAddedInOnePlace(t *testing.T) {
	ran := make(chan int64, 1)
	revived := make(chan int64, 1)
	hooks := func(Config) jobqueue.Kind {
		return jobqueue.Kind{Name: "fixture", Revive: func(_ context.Context, _ pgx.Tx, j jobqueue.Job) error {
			revived <- j.Subject
			return nil
		}}
	}
	fixture := jobKind{
		name:  "fixture",
		hooks: hooks,
		worker: func(workerParts) (jobqueue.Kind, error) {
			k := hooks(Config{})
			k.Run = func(_ context.Context, j jobqueue.Job) (jobqueue.Result, error) {
				ran <- j.Subject
				return jobqueue.Result{}, nil
			}
			return k, nil
		},
		concurrency: func(Config) int { return 3 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
	}
	// A periodic kind is one more entry: the worker node's scheduler enqueues it every second.
	scheduled := make(chan int64, 1)
	every, err := jobqueue.Every(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	periodic := jobKind{
		name: "fixture-periodic",
		hooks: func(Config) jobqueue.Kind {
			return jobqueue.Kind{Name: "fixture-periodic", Periodic: &jobqueue.Periodic{Schedule: every}}
		},
		worker: func(workerParts) (jobqueue.Kind, error) {
			return jobqueue.Kind{Name: "fixture-periodic", Periodic: &jobqueue.Periodic{Schedule: every},
				Run: func(_ context.Context, j jobqueue.Job) (jobqueue.Result, error) {
					select {
					case scheduled <- j.Subject:
					default:
					}
					return jobqueue.Result{}, nil
				}}, nil
		},
		concurrency: func(Config) int { return 1 },
		retryCap:    func(cfg Config) time.Duration { return cfg.JobRetryCap },
	}
	pool, dbURL := pgtest.Pool(t)
	config := func(role string) Config {
		t.Helper()
		for name, value := range map[string]string{
			"DATABASE_URL":               dbURL,
			"PLAYHEAD_ROLE":              role,
			"PLAYHEAD_JWT_SECRET":        strings.Repeat("s", 32),
			"PLAYHEAD_HTTP_ADDR":         "127.0.0.1:0",
			"PLAYHEAD_METRICS_ADDR":      "127.0.0.1:0",
			"PLAYHEAD_STORAGE_DIR":       t.TempDir(),
			"PLAYHEAD_JOB_POLL_INTERVAL": "1h",
		} {
			t.Setenv(name, value)
		}
		cfg, err := loadConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	worker := config(roleWorker)
	without := poolConns(worker)
	saved := jobKinds
	jobKinds = append(slices.Clone(jobKinds), fixture, periodic)
	t.Cleanup(func() { jobKinds = saved })
	if got := poolConns(worker); got != without+4 {
		t.Errorf("worker pool with the fixture kinds: %d connections, want %d (one per running job of them)", got, without+4)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	n, err := build(ctx, worker, logger)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- n.run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("worker stop: %v", err)
		}
	})
	waitAnswers200(t, "http://"+n.metricsLn.Addr().String()+"/readyz")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := jobqueue.Enqueue(ctx, tx, "fixture", 42, 3)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case subject := <-ran:
		if subject != 42 {
			t.Errorf("the fixture job ran on subject %d, want 42", subject)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker node never ran the fixture kind's job")
	}

	select {
	case runTime := <-scheduled:
		if runTime%1000 != 0 {
			t.Errorf("the periodic fixture job ran for %d, not a run time on the second", runTime)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker node's scheduler never ran the periodic fixture kind")
	}

	api, err := build(ctx, config(roleAPI), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer api.closeAll()
	var dead int64
	if err := pool.QueryRow(ctx, `INSERT INTO jobs (kind, subject_id, max_attempts, status) VALUES ('fixture', 43, 3, 'DEAD') RETURNING id`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if err := api.queue.RetryDead(ctx, dead); err != nil {
		t.Fatalf("the api node's admin retry of a DEAD fixture job: %v", err)
	}
	if subject := <-revived; subject != 43 {
		t.Errorf("the retry revived subject %d, want 43", subject)
	}
}

// waitAnswers200 waits until url answers 200 (a node's /readyz), for at most a minute.
func waitAnswers200(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 (last: %v)", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobKinds_SettingsNamed: the settings the job kinds table names are those the kinds read:
// setting the one named for a kind's concurrency, retry cap or schedule changes that figure of
// the kind, and the attempts and run limit name registered settings of the right type.
func TestJobKinds_SettingsNamed(t *testing.T) {
	sevenSeconds, err := jobqueue.Every(7 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range jobKinds {
		s := k.settings
		if k.doc == "" {
			t.Errorf("kind %s: no doc", k.name)
		}
		if s.concurrency != "" {
			if got := k.concurrency(docsConfig(t, map[string]string{s.concurrency: "7"})); got != 7 {
				t.Errorf("kind %s: with %s=7 its concurrency is %d: the table names the wrong setting", k.name, s.concurrency, got)
			}
		}
		if s.maxRunning != "" {
			cfg := docsConfig(t, map[string]string{s.maxRunning: "7"})
			if got := k.limited(cfg, k.hooks(cfg)).MaxRunning; got != 7 {
				t.Errorf("kind %s: with %s=7 its cluster-wide limit is %d: the table names the wrong setting", k.name, s.maxRunning, got)
			}
		}
		if s.retryCap != "" {
			if got := k.retryCap(docsConfig(t, map[string]string{s.retryCap: "7m"})); got != 7*time.Minute {
				t.Errorf("kind %s: with %s=7m its retry cap is %v: the table names the wrong setting", k.name, s.retryCap, got)
			}
		}
		if s.schedule != "" {
			p := k.hooks(docsConfig(t, map[string]string{s.schedule: "7s"})).Periodic
			if p == nil || p.Schedule.String() != sevenSeconds.String() {
				t.Errorf("kind %s: with %s=7s its schedule is not every 7s: the table names the wrong setting", k.name, s.schedule)
			}
		}
		for name, typ := range map[string]settingType{s.attempts: typeInt, s.timeout: typeDuration} {
			if name != "" && (settingIndex[name] == nil || settingIndex[name].typ != typ) {
				t.Errorf("kind %s: %s is not a registered %s setting", k.name, name, typ)
			}
		}
	}
}
