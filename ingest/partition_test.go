package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/storage"
)

// TestIngest_AnImportTakesTheImportersTurns: an import's downloads are in the importing
// admin's fairness partition, and so is the encode each one enqueues (at high priority, as an
// upload's): the import's rows take turns with other members' uploads instead of queueing
// ahead of them. WithFIFO puts both in the one partition of a first-in, first-out queue.
func TestIngest_AnImportTakesTheImportersTurns(t *testing.T) {
	for _, c := range []struct {
		name      string
		fifo      bool
		partition string
	}{{"fair", false, "9"}, {"FIFO", true, ""}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.Pool(t)
			ctx := context.Background()
			good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "video/mp4")
				_, _ = io.WriteString(w, "the video")
			}))
			t.Cleanup(good.Close)
			store := ingest.NewStore(pool, 5).WithFIFO(c.fifo)
			if _, err := store.Create(ctx, 9, "sheet.csv", ingest.Sheet{Rows: []ingest.Row{
				{Number: 2, Collection: "c", Chapter: 1, Order: 1, VideoURL: good.URL + "/a.mp4"}}}); err != nil {
				t.Fatal(err)
			}
			var partition string
			if err := pool.QueryRow(ctx, `SELECT partition_key FROM jobs WHERE kind = 'ingest'`).Scan(&partition); err != nil || partition != c.partition {
				t.Fatalf("the download's partition: %q (%v), want %q", partition, err, c.partition)
			}

			objects, err := storage.NewLocal(filepath.Join(t.TempDir(), "objects"))
			if err != nil {
				t.Fatal(err)
			}
			importer := &ingest.Ingest{Store: store, Objects: objects, EncodeKind: "encode", EncodeAttempts: 3, ScratchDir: t.TempDir(),
				Fetcher: ingest.NewFetcher(ingest.FetchConfig{AllowPrivate: true})}
			queue, err := jobqueue.NewQueue(pool, time.Minute, importer.Kind())
			if err != nil {
				t.Fatal(err)
			}
			w, err := jobqueue.NewRunner(queue, jobqueue.RunnerConfig{Kind: ingest.KindIngest, Node: "n", Concurrency: 1,
				PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Stop(context.Background()) })

			var priority int
			deadline := time.Now().Add(60 * time.Second)
			for {
				err := pool.QueryRow(ctx, `SELECT partition_key, priority FROM jobs WHERE kind = 'encode'`).Scan(&partition, &priority)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no encode job after the download: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if partition != c.partition || priority != int(jobqueue.PriorityHigh) {
				t.Errorf("the encode after the download: partition %q, priority %d; want %q, high", partition, priority, c.partition)
			}
		})
	}
}
