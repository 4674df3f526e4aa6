package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/storage"
)

// blackhole accepts connections and reads requests but never answers, like a server behind a
// dead load balancer; it counts the connections made to it.
func blackhole(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				go func() { <-stop; c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() { ln.Close(); close(stop); wg.Wait() })
	return "http://" + ln.Addr().String(), &conns
}

// TestIngest_UnreachableLinksDoNotHoldTheSlots: two imported links to a server that never
// answers must not hold both download slots for minutes, as they would retrying inside their
// jobs with sleeps in between. Each job attempt makes one request under ResponseTimeout and
// goes back to the queue with backoff, so the slots are free for the next row: a good link
// imported after them is downloaded while they wait, and the dead server sees exactly one
// connection per job attempt.
func TestIngest_UnreachableLinksDoNotHoldTheSlots(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	dead, conns := blackhole(t)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = io.WriteString(w, "the video")
	}))
	t.Cleanup(good.Close)

	store := ingest.NewStore(pool, 5)
	rows := []ingest.Row{
		{Number: 2, Collection: "c", Chapter: 1, Order: 1, VideoURL: dead + "/a.mp4"},
		{Number: 3, Collection: "c", Chapter: 1, Order: 2, VideoURL: dead + "/b.mp4"},
		{Number: 4, Collection: "c", Chapter: 1, Order: 3, VideoURL: good.URL + "/c.mp4"},
	}
	if _, err := store.Create(ctx, 1, "sheet.csv", ingest.Sheet{Rows: rows}); err != nil {
		t.Fatal(err)
	}
	objects, err := storage.NewLocal(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	importer := &ingest.Ingest{Store: store, Objects: objects, EncodeKind: "encode", EncodeAttempts: 3, ScratchDir: t.TempDir(),
		Fetcher: ingest.NewFetcher(ingest.FetchConfig{AllowPrivate: true, ResponseTimeout: 300 * time.Millisecond})}
	queue, err := jobqueue.NewQueue(pool, time.Minute, importer.Kind())
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobqueue.NewRunner(queue, jobqueue.RunnerConfig{Kind: ingest.KindIngest, Node: "n", Concurrency: 2, PollInterval: 20 * time.Millisecond,
		// Long backoff: a job handed back stays out of the way for the rest of the test.
		RetryBase: 24 * time.Hour, RetryCap: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for count(`SELECT count(*) FROM jobs WHERE kind = 'ingest' AND status = 'COMPLETED'`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the good link was not downloaded while two dead links were queued before it (dead server saw %d connections)", conns.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every job is now either done or handed back; none sleeps in a slot.
	for count(`SELECT count(*) FROM jobs WHERE kind = 'ingest' AND status = 'PROCESSING'`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a dead link's job is still PROCESSING")
		}
		time.Sleep(20 * time.Millisecond)
	}
	attempts := count(`SELECT coalesce(sum(attempt_count), 0) FROM jobs j JOIN import_rows r ON r.media_id = j.subject_id
		WHERE j.kind = 'ingest' AND r.video_url LIKE '` + dead + `%'`)
	handedBack := count(`SELECT count(*) FROM jobs j JOIN import_rows r ON r.media_id = j.subject_id
		WHERE j.kind = 'ingest' AND j.status = 'PENDING' AND r.video_url LIKE '` + dead + `%'`)
	t.Logf("dead links: %d job attempts, %d connections to the dead server, %d jobs handed back to the queue", attempts, conns.Load(), handedBack)
	if int(conns.Load()) != attempts {
		t.Errorf("the dead server saw %d connections for %d job attempts: an attempt retried inside its job", conns.Load(), attempts)
	}
	if handedBack != 2 {
		t.Errorf("%d of the 2 dead links' jobs are PENDING for a later attempt, want both", handedBack)
	}
}
