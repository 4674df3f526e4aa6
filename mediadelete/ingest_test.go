package mediadelete_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/storage"
)

// TestDeleteJob_AnImportThatFinishesLateLeavesNothing: an imported media is deleted while its
// download runs. The download finishes after the deletion: its completion must neither give
// the DELETED media a source nor enqueue an encode of it, and the downloaded file must not be
// left in the store once the deletion job is done (the job's arguments, taken at the
// deletion, name no source yet).
func TestDeleteJob_AnImportThatFinishesLateLeavesNothing(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	exec(t, pool, `INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING`)
	requested, release := make(chan struct{}), make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(requested)
		<-release
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = io.WriteString(w, "the video")
	}))
	t.Cleanup(server.Close)
	store := ingest.NewStore(pool, 5)
	if _, err := store.Create(ctx, 1, "sheet.csv", ingest.Sheet{Rows: []ingest.Row{
		{Number: 2, Collection: "c", Chapter: 1, Order: 1, VideoURL: server.URL + "/lesson.mp4"},
	}}); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := pool.QueryRow(ctx, `SELECT media_id FROM import_rows`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	importer := &ingest.Ingest{Store: store, Objects: st, EncodeKind: "encode", EncodeAttempts: 3, ScratchDir: t.TempDir(),
		Fetcher: ingest.NewFetcher(ingest.FetchConfig{AllowPrivate: true})}
	queue, err := jobqueue.NewQueue(pool, time.Hour, importer.Kind())
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobqueue.NewRunner(queue, jobqueue.RunnerConfig{Kind: ingest.KindIngest, Node: "n", PollInterval: 20 * time.Millisecond,
		RetryBase: time.Hour, RetryCap: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	<-requested

	if err := deleteMedia(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	startDeletions(t, pool, st, prometheus.NewRegistry())
	waitUntil(t, "the deletion to wait for the running download", func() bool {
		return count(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'media_delete' AND subject_id = $1 AND attempt_count >= 1 AND status = 'PENDING'`, id) == 1
	})
	close(release)
	waitUntil(t, "the download's completion", func() bool {
		return count(t, pool, `SELECT count(*) FROM jobs WHERE kind = $1 AND subject_id = $2 AND status = 'COMPLETED'`, ingest.KindIngest, id) == 1
	})
	if n := count(t, pool, `SELECT count(*) FROM media WHERE id = $1 AND (status <> 'DELETED' OR source_key IS NOT NULL)`, id); n != 0 {
		t.Error("the late download gave the deleted media a source or a status")
	}
	if n := count(t, pool, `SELECT count(*) FROM jobs WHERE kind = 'encode' AND subject_id = $1`, id); n != 0 {
		t.Error("the late download enqueued an encode of the deleted media")
	}
	exec(t, pool, `UPDATE jobs SET available_at = now() WHERE kind = 'media_delete' AND subject_id = $1`, id)
	deletionDone(t, pool, id)
	if left := keys(t, st); len(left) != 0 {
		t.Errorf("objects left after the deletion of the media whose download finished late: %q", left)
	}
}
