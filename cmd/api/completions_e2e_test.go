package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/ssetest"
	"github.com/playhead/playhead/media"
)

// completionBody is what a receiver reads of a playback.completed delivery.
type completionBody struct {
	Type string                  `json:"type"`
	Data media.PlaybackCompleted `json:"data"`
}

// finishKey is one finish as a consumer tells it apart: member, media and the finish's time.
type finishKey struct {
	member, media int64
	finishedAt    string
}

// TestCompletions_DeliveredOncePerFinishUnderChaos: a webhook receiver on loopback counts the
// playback.completed deliveries it gets, by (member, media, finish), each signature checked
// with the Standard Webhooks library, while every member finishes the same media three times
// through the faults the write-behind is built for:
//
//  1. two nodes: node A, cut off from the database, holds a 96 % report while node B stores a
//     newer 97 %; A's flush is retried until the database answers again and then writes its
//     older finished report after B's;
//  2. a rewatch, then a finishing flush whose commit answer is lost (the proxy cuts the
//     connection after the server ran it), retried by the buffer;
//  3. a rewatch, then a finishing report held while the database is away, spilled at the stop
//     and replayed by the next start.
//
// Each member's three finishes are delivered once each; a member who never finished gets
// nothing.
func TestCompletions_DeliveredOncePerFinishUnderChaos(t *testing.T) {
	dbURL := pgtest.URL(t)
	proxy, proxied := pgtest.Proxied(t, dbURL)
	spillDir := t.TempDir()
	envA := webhookEnv(t, "completions-a", t.TempDir())
	envA["DATABASE_URL"] = proxied
	envA["PLAYHEAD_FLUSH_INTERVAL"] = "100ms"
	envA["PLAYHEAD_SPILL_DIR"] = spillDir
	envA["PLAYHEAD_SHUTDOWN_TIMEOUT"] = "4s"
	a := binarytest.Start(t, envA)
	envB := webhookEnv(t, "completions-b", t.TempDir())
	envB["DATABASE_URL"] = dbURL
	envB["PLAYHEAD_FLUSH_INTERVAL"] = "100ms"
	envB["PLAYHEAD_SPILL_DIR"] = t.TempDir()
	b := binarytest.Start(t, envB)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	adminToken := binarytest.Token(t, 1, true)
	recv := newReceiver(t, func(int) int { return http.StatusOK })
	hook := registerWebhookFor(t, b, adminToken, recv.URL, []string{media.EventPlaybackCompleted})
	lesson := b.CreateMedia(t, adminToken, "finished three times")

	// Member ids whose 8 bytes are distinctive, so that the proxy can find the first one in a
	// flush's binary parameters.
	const first = 0x5a5a5a5a
	members := make([]int64, 6)
	tokens := map[int64]string{}
	for i := range members {
		members[i] = first + int64(i)
		tokens[members[i]] = binarytest.Token(t, members[i], false)
	}
	const idle = first + 100
	tokens[idle] = binarytest.Token(t, idle, false)
	put := func(s *binarytest.Server, member int64, ratio float64) {
		t.Helper()
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", lesson), tokens[member],
			map[string]any{"position_ms": int64(ratio * binarytest.MediaDurationMS)})
	}
	everyone := func(s *binarytest.Server, ratio float64) {
		t.Helper()
		for _, m := range members {
			put(s, m, ratio)
		}
	}
	cutOff := func() { proxy.Refuse(true); proxy.ResetAll() }
	heal := func() { proxy.Refuse(false) }

	// Every node opens the media once, so that it is in their caches before the faults.
	put(a, idle, 0.5)
	put(b, idle, 0.5)
	everyone(a, 0.5)
	waitWritten(t, a)

	// 1. Two nodes, the older finished report written last, after retries.
	cutOff()
	everyone(a, 0.96)
	everyone(b, 0.97)
	waitWritten(t, b)
	waitMetric(t, a, "playhead_playback_buffer_retry_held_keys", 1) // A's flush failed and waits to retry
	heal()
	waitWritten(t, a)

	// 2. A rewatch, then a finish whose commit answer is lost. The cut is armed once no mover
	// has finishes left to move: its statements carry the members' ids too.
	everyone(a, 0.1)
	waitWritten(t, a)
	waitMoved(t, pool)
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], first)
	cut := proxy.CutAfter(id[:])
	everyone(a, 0.98)
	<-cut
	waitWritten(t, a)

	// 3. A rewatch, then a finish spilled at the stop and replayed at the next start.
	everyone(a, 0.1)
	waitWritten(t, a)
	cutOff()
	everyone(a, 0.99)
	a.Stop(t)
	if files, _ := filepath.Glob(filepath.Join(spillDir, "playback-*.spill")); len(files) != 1 {
		t.Fatalf("spill files after the stop: %v, want 1; stderr:\n%s", files, a.Stderr)
	}
	heal()
	envA["DATABASE_URL"] = dbURL
	again := binarytest.Start(t, envA)
	if n := again.Metric(t, "playhead_playback_buffer_replayed_rows_total"); n != float64(len(members)) {
		t.Fatalf("replayed %v rows, want %d", n, len(members))
	}

	// Everything announced and delivered: no finish waits to be moved, no event to be relayed,
	// no delivery to be made.
	for {
		var pending int
		if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM playback_completions)
			+ (SELECT count(*) FROM notification_outbox WHERE relayed_at IS NULL)
			+ (SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'DELIVERED')`, hook.ID).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	again.Stop(t)
	b.Stop(t)

	counts := map[finishKey]int{}
	perMember := map[int64]int{}
	seen := map[string]bool{} // webhook-id: a receiver takes a redelivery of a message once
	for _, req := range recv.requests() {
		if err := verifyWithStandardWebhooks(t, hook.Secret, req.header, req.body); err != nil {
			t.Fatalf("a delivery's signature does not verify: %v", err)
		}
		if seen[req.header.Get("webhook-id")] {
			continue
		}
		seen[req.header.Get("webhook-id")] = true
		var body completionBody
		if err := json.Unmarshal(req.body, &body); err != nil || body.Type != media.EventPlaybackCompleted {
			t.Fatalf("delivery %s: %v", req.body, err)
		}
		d := body.Data
		if d.MediaID != lesson || d.How != media.FinishedByPosition || d.DurationMS != binarytest.MediaDurationMS {
			t.Errorf("delivery %s: want media %d finished by position of %d ms", req.body, lesson, binarytest.MediaDurationMS)
		}
		counts[finishKey{d.MemberID, d.MediaID, d.FinishedAt.UTC().Format(time.RFC3339Nano)}]++
		perMember[d.MemberID]++
	}
	for k, n := range counts {
		if n != 1 {
			t.Errorf("finish %+v delivered as %d events, want 1", k, n)
		}
	}
	for _, m := range members {
		if perMember[m] != 3 {
			t.Errorf("member %d: %d finishes delivered, want 3", m, perMember[m])
		}
	}
	if perMember[idle] != 0 {
		t.Errorf("a member who never finished got %d events", perMember[idle])
	}
	t.Logf("%d deliveries, %d events, %d members finished 3 times each through two nodes, a lost commit answer and a spill",
		len(recv.requests()), len(seen), len(members))
}

// TestCompletions_StreamedToTheMemberOnly: a member's event stream shows their
// playback.completed; another member's stream, open meanwhile, shows nothing.
func TestCompletions_StreamedToTheMemberOnly(t *testing.T) {
	env := webhookEnv(t, "completions-sse", t.TempDir())
	env["PLAYHEAD_FLUSH_INTERVAL"] = "100ms"
	s := binarytest.Start(t, env)
	lesson := s.CreateMedia(t, binarytest.Token(t, 1, true), "streamed")
	mine, theirs := binarytest.Token(t, 61, false), binarytest.Token(t, 62, false)
	streams := &http.Client{Transport: s.Client.Transport}
	myStream := ssetest.Open(t, streams, s.URL("/v1/events"), mine, "")
	theirStream := ssetest.Open(t, streams, s.URL("/v1/events"), theirs, "")

	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", lesson), theirs,
		map[string]any{"position_ms": binarytest.MediaDurationMS / 2})
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", lesson), mine,
		map[string]any{"position_ms": binarytest.MediaDurationMS - 1000})
	e := myStream.Next(t)
	var body completionBody
	if err := json.Unmarshal([]byte(e.Raw), &body); err != nil {
		t.Fatal(err)
	}
	if e.Name != media.EventPlaybackCompleted || e.ID != strconv.FormatInt(body.Data.EventID, 10) || body.Data.MemberID != 61 ||
		body.Data.MediaID != lesson || body.Data.How != media.FinishedByPosition {
		t.Fatalf("the member's stream got %s %s %s", e.ID, e.Name, e.Raw)
	}
	s.Stop(t)
	theirStream.WaitEnd(t)
	select {
	case e := <-theirStream.Events:
		t.Errorf("another member's stream got %s %s", e.Name, e.Raw)
	default:
	}
}

// waitWritten waits until s's playback buffer holds nothing: every report it took is written.
func waitWritten(t *testing.T, s *binarytest.Server) {
	t.Helper()
	for s.Metric(t, "playhead_playback_buffer_depth") != 0 || s.Metric(t, "playhead_playback_buffer_held_keys") != 0 {
		time.Sleep(20 * time.Millisecond)
	}
}

// waitMoved waits until every finish recorded is moved into the outbox.
func waitMoved(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for {
		var left int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM playback_completions`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
