package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/egress"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// setup returns a pool on a fresh database with a member, two of its media items and two
// endpoints (the second only for media.failed), and their ids.
func setup(t *testing.T) (pool *pgxpool.Pool, media1, media2, all, failedOnly int64) {
	t.Helper()
	pool, _ = pgtest.Pool(t)
	ctx := t.Context()
	exec := func(sql string, args ...any) {
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO members (id) VALUES (7)`)
	for _, dst := range []*int64{&media1, &media2} {
		if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status) VALUES (7, 'm', 'PROCESSING') RETURNING id`).Scan(dst); err != nil {
			t.Fatal(err)
		}
	}
	store := NewStore(pool)
	a, err := store.Create(ctx, "https://8.8.8.8/a", media.EventTypes, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := store.Create(ctx, "https://8.8.4.4/f", []string{media.EventFailed}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pool, media1, media2, a.ID, f.ID
}

func outbox(t *testing.T, pool *pgxpool.Pool, mediaID int64, kind string) {
	t.Helper()
	if err := media.Outbox(t.Context(), pool, 7, mediaID, kind, nil); err != nil {
		t.Fatal(err)
	}
}

type deliveryRow struct {
	endpoint, media, outbox int64
	status                  string
}

func deliveries(t *testing.T, pool *pgxpool.Pool) []deliveryRow {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT endpoint_id, media_id, outbox_id, status FROM webhook_deliveries ORDER BY outbox_id, endpoint_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []deliveryRow
	for rows.Next() {
		var d deliveryRow
		if err := rows.Scan(&d.endpoint, &d.media, &d.outbox, &d.status); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// Four relays at once, on a backlog of events about two media items: every event gets exactly
// one delivery per matching endpoint, and every (endpoint, media) chain has exactly one job,
// its oldest delivery's. Completing that job queues the next of its chain, and only that one.
func TestRelay_ConcurrentRelaysAndChainOrder(t *testing.T) {
	pool, m1, m2, all, failedOnly := setup(t)
	// m1: failed, ready, failed; m2: ready. Endpoint all gets 4, failedOnly gets 2 (m1's).
	for _, e := range []struct {
		media int64
		kind  string
	}{{m1, media.OutboxFailed}, {m1, media.OutboxReady}, {m2, media.OutboxReady}, {m1, media.OutboxFailed}} {
		outbox(t, pool, e.media, e.kind)
	}
	// Each relay goes on until the outbox is relayed (at most 500 tries): a relay that finds
	// another holding the relay lock does nothing that round, and with a fixed number of
	// rounds the three that lose could use theirs up while the fourth held the lock, leaving
	// a row unrelayed (1 run in about 15 here).
	var wg sync.WaitGroup
	relays := make([]*Relay, 4)
	unrelayed := func() int {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM notification_outbox WHERE relayed_at IS NULL`).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	for i := range relays {
		relays[i] = NewRelay(pool, RelayConfig{Batch: 1, MaxAttempts: 3})
		wg.Go(func() {
			for try := 0; try < 500 && unrelayed() > 0; try++ {
				if _, err := relays[i].RelayOnce(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got := deliveries(t, pool)
	want := map[int64]int{all: 4, failedOnly: 2}
	queued := map[[2]int64]int{}
	for _, d := range got {
		want[d.endpoint]--
		if d.status == "QUEUED" {
			queued[[2]int64{d.endpoint, d.media}]++
		}
	}
	if want[all] != 0 || want[failedOnly] != 0 {
		t.Fatalf("deliveries %+v: not one per event and matching endpoint", got)
	}
	if len(queued) != 3 || queued[[2]int64{all, m1}] != 1 || queued[[2]int64{all, m2}] != 1 || queued[[2]int64{failedOnly, m1}] != 1 {
		t.Fatalf("deliveries %+v: want exactly one QUEUED per chain (3 chains)", got)
	}
	var jobs int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM jobs WHERE kind = $1`, KindDeliver).Scan(&jobs); err != nil || jobs != 3 {
		t.Fatalf("%d delivery jobs (%v), want 3", jobs, err)
	}

	// Finish the head of (all, m1): the next of that chain, and only it, is queued.
	q, err := jobqueue.NewQueue(pool, time.Minute, JobKind(3))
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(t.Context(), KindDeliver, 10, "test")
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d (%v), want 3", len(claimed), err)
	}
	var head jobqueue.Job
	var firstOutbox int64
	for _, j := range claimed {
		var endpoint, mediaID, ob int64
		if err := pool.QueryRow(t.Context(), `SELECT endpoint_id, media_id, outbox_id FROM webhook_deliveries WHERE id = $1`, j.Subject).Scan(&endpoint, &mediaID, &ob); err != nil {
			t.Fatal(err)
		}
		if endpoint == all && mediaID == m1 {
			head, firstOutbox = j, ob
		}
	}
	if err := q.Dead(t.Context(), head, errors.New("receiver down")); err != nil {
		t.Fatal(err)
	}
	var next deliveryRow
	for _, d := range deliveries(t, pool) {
		if d.endpoint == all && d.media == m1 && d.status == "QUEUED" {
			if next.outbox != 0 {
				t.Fatalf("two QUEUED deliveries in chain (all, m1) after its head went DEAD: %+v", deliveries(t, pool))
			}
			next = d
		}
	}
	if next.outbox <= firstOutbox {
		t.Fatalf("after the head (event %d) went DEAD, the queued delivery of its chain is %+v, want the next event's", firstOutbox, next)
	}
	for _, d := range deliveries(t, pool) {
		if d.endpoint == all && d.media == m1 && d.outbox > next.outbox && d.status != "WAITING" {
			t.Fatalf("a newer delivery of the chain is %s before the older one was delivered: %+v", d.status, deliveries(t, pool))
		}
	}
}

// A relay transaction that dies before committing (a node killed mid-relay) leaves its rows to
// be relayed, once, by the next run.
func TestRelay_RolledBackRelayIsRedone(t *testing.T) {
	pool, m1, _, all, _ := setup(t)
	outbox(t, pool, m1, media.OutboxReady)
	ctx, cancel := context.WithCancel(context.Background())
	// The relay dies mid-transaction: it waits on an endpoint row locked here (its delivery's
	// foreign key check), after marking the outbox row relayed, and is cancelled there.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE`, all); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := NewRelay(pool, RelayConfig{}).RelayOnce(ctx); done <- err }()
	pgtest.WaitBlocked(t, pool, 0)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled relay reported success")
	}
	_ = tx.Rollback(t.Context())
	if got := deliveries(t, pool); len(got) != 0 {
		t.Fatalf("a relay that did not commit left deliveries: %+v", got)
	}
	// The dead relay's backend may hold the relay lock a moment longer (the next run is then a
	// no-op, as on another node): retry, as the relay loop does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := NewRelay(pool, RelayConfig{}).RelayOnce(t.Context())
		if err != nil || n > 1 {
			t.Fatalf("the next relay relayed %d rows (%v), want 1", n, err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the outbox row was never relayed again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := deliveries(t, pool); len(got) != 1 || got[0].status != "QUEUED" {
		t.Fatalf("deliveries %+v, want one QUEUED", got)
	}
}

// The sender checks the address it dials, not only the registration: a URL whose host now
// resolves to loopback is refused at delivery, permanently, without reaching the server, in
// every form that reaches it (0.0.0.0 is this host on Linux; an IPv4-mapped IPv6 address is the
// IPv4 one). Names and numeric forms that Go does not read as addresses (decimal, octal, hex
// IPv4) either resolve to loopback and are refused, or do not resolve: never reached.
func TestSender_RefusesPrivateAddressAtDelivery(t *testing.T) {
	var hit atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	s := NewSender(SenderConfig{})
	for _, tc := range []struct {
		host      string
		forbidden bool // a literal address: refused by the policy, not by resolution
	}{
		{"127.0.0.1", true}, {"0.0.0.0", true}, {"[::ffff:127.0.0.1]", true}, {"[::1]", true},
		{"localhost", false}, {"2130706433", false}, {"0177.0.0.1", false}, {"0x7f.0.0.1", false}, {"127.1", false},
	} {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s:%d/hook", tc.host, port), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.send(req)
		switch {
		case err == nil:
			t.Errorf("send to %s = nil, want an error", tc.host)
		case tc.forbidden && (!errors.Is(err, egress.ErrForbiddenAddress) || !jobqueue.IsPermanent(err)):
			t.Errorf("send to %s = %v, want a permanent ErrForbiddenAddress", tc.host, err)
		}
		if hit.Load() {
			t.Fatalf("the loopback server was reached through %s", tc.host)
		}
	}
}

// An endpoint deleted while its deliveries are pending takes them with it: its queued job,
// when it runs, sends nothing and completes (as does one that goes DEAD), and nothing further
// of its chain is queued; the other endpoints' chains go on.
func TestDeletedEndpointStopsItsChain(t *testing.T) {
	pool, m1, _, all, _ := setup(t)
	var hit atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Add(1) }))
	defer srv.Close()
	store := NewStore(pool)
	gone, err := store.Create(t.Context(), srv.URL, media.EventTypes, 1)
	if err != nil {
		t.Fatal(err)
	}
	outbox(t, pool, m1, media.OutboxFailed)
	outbox(t, pool, m1, media.OutboxReady)
	outbox(t, pool, m1, media.OutboxFailed)
	if _, err := NewRelay(pool, RelayConfig{}).RelayOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	sender := NewSender(SenderConfig{Pool: pool, AllowPrivate: true, MaxAttempts: 3})
	q, err := jobqueue.NewQueue(pool, time.Minute, sender.Kind())
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.Claim(t.Context(), KindDeliver, 10, "test")
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d (%v), want the heads of three chains (one per endpoint)", len(claimed), err)
	}
	var goneJob, otherJob jobqueue.Job
	for _, j := range claimed {
		var endpoint int64
		if err := pool.QueryRow(t.Context(), `SELECT endpoint_id FROM webhook_deliveries WHERE id = $1`, j.Subject).Scan(&endpoint); err != nil {
			t.Fatal(err)
		}
		switch endpoint {
		case gone.ID:
			goneJob = j
		case all:
			otherJob = j
		}
	}
	if err := store.Delete(t.Context(), gone.ID); err != nil {
		t.Fatal(err)
	}

	res, err := sender.run(t.Context(), goneJob)
	if err != nil {
		t.Fatalf("run of a deleted endpoint's delivery = %v, want nil (nothing to send)", err)
	}
	if res.Commit != nil {
		t.Fatal("run of a deleted endpoint's delivery has a commit, want none (nothing was delivered)")
	}
	// Its job going DEAD (its attempts spent before the deletion) finds no delivery to mark
	// and no chain to advance, and is no error.
	if err := q.Dead(t.Context(), goneJob, errors.New("receiver down")); err != nil {
		t.Fatalf("a deleted endpoint's delivery job going DEAD: %v", err)
	}
	if n := hit.Load(); n != 0 {
		t.Fatalf("the deleted endpoint received %d requests", n)
	}
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, gone.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d deliveries of the deleted endpoint left (%v), want 0", left, err)
	}
	// The other endpoint's head goes DEAD: its chain goes on.
	if err := q.Dead(t.Context(), otherJob, errors.New("receiver down")); err != nil {
		t.Fatal(err)
	}
	var pending, orphans int
	if err := pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE d.id IS NOT NULL AND d.endpoint_id = $2), count(*) FILTER (WHERE d.id IS NULL)
		FROM jobs j LEFT JOIN webhook_deliveries d ON d.id = j.subject_id
		WHERE j.kind = $1 AND j.status = 'PENDING'`, KindDeliver, all).Scan(&pending, &orphans); err != nil {
		t.Fatal(err)
	}
	if pending != 1 || orphans != 0 {
		t.Fatalf("pending delivery jobs: %d of the remaining endpoint (want 1, its chain's next), %d of deleted deliveries (want 0)", pending, orphans)
	}
}
