package mediadelete_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/mediadelete"
	"github.com/playhead/playhead/webhooks"
)

// TestDeleteJob_TheDeletedEventIsDeliveredBehindARemovedDelivery: an endpoint's chain of a
// media holds media.playable (its job sending), media.ready (waiting behind it) and
// media.deleted (waiting behind both). The deletion job's completion removes the waiting
// media.ready while media.playable's job ends: that job's completion must not make the removed
// delivery the chain's head, or media.deleted waits for ever behind a delivery that no longer
// exists. It is delivered, once.
func TestDeleteJob_TheDeletedEventIsDeliveredBehindARemovedDelivery(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	exec(t, pool, `INSERT INTO members (id) VALUES (3)`)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility) VALUES (3, 'clip', 'READY', 'PUBLIC') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	sending, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var received []string
	var once sync.Once
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e media.Event
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &e)
		mu.Lock()
		received = append(received, e.Type)
		mu.Unlock()
		once.Do(func() { close(sending); <-release })
	}))
	t.Cleanup(receiver.Close)
	if _, err := webhooks.NewStore(pool).Create(ctx, receiver.URL, media.EventTypes, 3); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{media.OutboxPlayable, media.OutboxReady} {
		if err := media.Outbox(ctx, pool, 3, id, kind, nil); err != nil {
			t.Fatal(err)
		}
	}
	relay := webhooks.NewRelay(pool, webhooks.RelayConfig{})
	if _, err := relay.RelayOnce(ctx); err != nil {
		t.Fatal(err)
	}
	sender := webhooks.NewSender(webhooks.SenderConfig{Pool: pool, AllowPrivate: true, MaxAttempts: 3})
	q, err := jobqueue.NewQueue(pool, time.Hour, sender.Kind())
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: webhooks.KindDeliver, Node: "n", PollInterval: 20 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryCap: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	<-sending // media.playable is at the receiver

	if err := deleteMedia(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.RelayOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var deletion jobqueue.Job
	if err := pool.QueryRow(ctx, `SELECT id, subject_id FROM jobs WHERE kind = $1`, mediadelete.KindDelete).Scan(&deletion.ID, &deletion.Subject); err != nil {
		t.Fatal(err)
	}
	// The deletion's completion, held open: it has removed the waiting media.ready when
	// media.playable's job completes.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM media WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	if err := mediadelete.DeleteRows(ctx, tx, deletion); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitUntil(t, "media.playable's completion to wait for the deletion's", func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Every delivery job has ended (a completion enqueues the chain's next head in its own
	// transaction, so none is missed between two reads).
	waitUntil(t, "the delivery jobs to end", func() bool {
		return count(t, pool, `SELECT count(*) FROM jobs WHERE kind = $1 AND status NOT IN ('COMPLETED', 'DEAD')`, webhooks.KindDeliver) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	deleted := 0
	for _, e := range received {
		if e == media.EventDeleted {
			deleted++
		}
	}
	if deleted != 1 {
		var status string
		_ = pool.QueryRow(ctx, `SELECT d.status FROM webhook_deliveries d JOIN notification_outbox o ON o.id = d.outbox_id WHERE o.kind = $1`,
			media.OutboxDeleted).Scan(&status)
		t.Errorf("the receiver got %q: media.deleted %d times, want once (its delivery is %s)", received, deleted, status)
	}
}
