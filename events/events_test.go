package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/events"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/ssetest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("test-secret-test-secret-test-secret!")

// server is one test's event streams: a real database, a real LISTEN connection and GET
// /v1/events on a loopback port, wired as the binary wires them.
type server struct {
	pool    *pgxpool.Pool
	dbURL   string
	hub     *events.Hub
	baseURL string
	// readProxy carries the hub's reads when options.readsViaProxy is set.
	readProxy *faultproxy.Proxy
	// logs holds what the hub logged, at debug level.
	logs *binarytest.Output
}

// waitLogged waits until logs hold text.
func waitLogged(t *testing.T, logs *binarytest.Output, text string) {
	t.Helper()
	deadline := time.Now().Add(ssetest.WaitLimit)
	for !strings.Contains(logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the hub never logged %q", text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type options struct {
	perMember, total int
	heartbeat        time.Duration
	// writeTimeout is both the app's (fasthttp's whole-answer deadline) and each stream write's.
	writeTimeout time.Duration
	// readsViaProxy sends the hub's outbox reads (not the listener) through s.readProxy.
	readsViaProxy bool
}

func start(t *testing.T, o options) *server {
	t.Helper()
	if o.perMember == 0 {
		o.perMember, o.total = 4, 100
	}
	if o.heartbeat == 0 {
		o.heartbeat = time.Minute
	}
	if o.writeTimeout == 0 {
		o.writeTimeout = 30 * time.Second
	}
	pool, dbURL := pgtest.Pool(t)
	s := &server{pool: pool, dbURL: dbURL, logs: &binarytest.Output{}}
	logger := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	readPool := pool
	if o.readsViaProxy {
		readPool = s.proxiedPool(t)
	}
	s.hub = events.NewHub(events.Config{Pool: readPool, PerMember: o.perMember, Total: o.total, Heartbeat: o.heartbeat,
		WriteTimeout: o.writeTimeout, Logger: logger})
	listener := notify.NewListener(dbURL, logger)
	connected := make(chan struct{}, 1)
	listener.Handle(media.ChannelOutbox, s.hub.Notify, func() {
		s.hub.Resync()
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	if err := listener.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Stop(context.Background()) })
	select {
	case <-connected:
	case <-time.After(ssetest.WaitLimit):
		t.Fatal("the listener did not connect")
	}
	verifier, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10, WriteTimeout: o.writeTimeout})
	s.hub.Register(app.Group("/v1", verifier.Middleware()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ssetest.WaitLimit)
		defer cancel()
		_ = s.hub.Stop(ctx) // as the binary does: streams end before the server waits for them
		_ = app.Shutdown()
		<-done
	})
	s.baseURL = "http://" + ln.Addr().String()
	return s
}

// proxiedPool starts s.readProxy in front of the test database and returns a pool through it.
func (s *server) proxiedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	proxy, pool := pgtest.ProxiedPool(t, s.dbURL)
	s.readProxy = proxy
	return pool
}

func token(t *testing.T, member int64, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.Mint(secret, member, false, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// announce writes an outbox row for member about mediaID, as the pipeline does (in a
// transaction, with its notification), and returns the row's id.
func (s *server) announce(t *testing.T, member, mediaID int64, kind string, payload map[string]any) int64 {
	t.Helper()
	ctx := context.Background()
	if err := media.EnsureMember(ctx, s.pool, member); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return media.Outbox(ctx, tx, member, mediaID, kind, payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.pool.QueryRow(ctx, `SELECT max(id) FROM notification_outbox WHERE member_id = $1`, member).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// open opens a stream for tok (with lastID as Last-Event-ID unless empty).
func (s *server) open(t *testing.T, tok, lastID string) *ssetest.Stream {
	t.Helper()
	return ssetest.Open(t, http.DefaultClient, s.baseURL+"/v1/events", tok, lastID)
}

func (s *server) get(t *testing.T, tok, lastID string) *http.Response {
	t.Helper()
	return ssetest.Get(t, http.DefaultClient, s.baseURL+"/v1/events", tok, lastID)
}

func TestStream_SendsTheMembersOwnEventsAsTheyHappen(t *testing.T) {
	s := start(t, options{})
	st := s.open(t, token(t, 1, time.Hour), "")

	// Member 2's event is written first: if it leaked into member 1's stream it would come first.
	s.announce(t, 2, 20, media.OutboxReady, nil)
	ready := s.announce(t, 1, 10, media.OutboxReady, map[string]any{"job_id": 5})
	failed := s.announce(t, 1, 11, media.OutboxFailed, map[string]any{"reason": "the file is not a video"})
	deleted := s.announce(t, 1, 12, media.OutboxDeleted, nil)

	e := st.Next(t)
	if e.ID != strconv.FormatInt(ready, 10) || e.Name != media.EventReady {
		t.Fatalf("first event: id %q type %q, want id %d type %s (member 2's event must not be sent)", e.ID, e.Name, ready, media.EventReady)
	}
	want := media.EventData{EventID: ready, MediaID: 10, OwnerID: 1, Status: "READY"}
	if e.Data.Type != media.EventReady || e.Data.Data != want || e.Data.Timestamp.IsZero() {
		t.Errorf("ready event body %+v, want type %s and data %+v", e.Data, media.EventReady, want)
	}
	e = st.Next(t)
	want = media.EventData{EventID: failed, MediaID: 11, OwnerID: 1, Status: "FAILED", Reason: "the file is not a video"}
	if e.ID != strconv.FormatInt(failed, 10) || e.Name != media.EventFailed || e.Data.Data != want {
		t.Errorf("failed event: id %q type %q body %+v, want id %d type %s data %+v", e.ID, e.Name, e.Data, failed, media.EventFailed, want)
	}
	e = st.Next(t)
	want = media.EventData{EventID: deleted, MediaID: 12, OwnerID: 1, Status: "DELETED"}
	if e.ID != strconv.FormatInt(deleted, 10) || e.Name != media.EventDeleted || e.Data.Data != want {
		t.Errorf("deleted event: id %q type %q body %+v, want id %d type %s data %+v", e.ID, e.Name, e.Data, deleted, media.EventDeleted, want)
	}
}

func TestStream_ResumesAfterLastEventIDAndStartsNowWithout(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	first := s.announce(t, 1, 10, media.OutboxReady, nil)
	second := s.announce(t, 1, 11, media.OutboxReady, nil)
	third := s.announce(t, 1, 12, media.OutboxFailed, map[string]any{"reason": "x"})

	resumed := s.open(t, tok, strconv.FormatInt(first, 10))
	for _, want := range []int64{second, third} {
		if e := resumed.Next(t); e.ID != strconv.FormatInt(want, 10) {
			t.Fatalf("resumed after %d: got event %s, want %d", first, e.ID, want)
		}
	}

	fresh := s.open(t, tok, "")
	later := s.announce(t, 1, 13, media.OutboxReady, nil)
	if e := fresh.Next(t); e.ID != strconv.FormatInt(later, 10) {
		t.Errorf("a stream without Last-Event-ID sent event %s first, want %d (the ones before it opened are not resent)", e.ID, later)
	}
	if e := resumed.Next(t); e.ID != strconv.FormatInt(later, 10) {
		t.Errorf("the resumed stream then sent %s, want %d", e.ID, later)
	}
}

// A stream resuming from before what the retention pruned cannot send what is gone: it starts
// with a resync event whose id is the member's newest event, and goes on from there; one
// resuming from the mark or after it is resumed as usual.
func TestStream_ResumeFromBeforeTheRetentionStartsWithResync(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	gone := s.announce(t, 1, 10, media.OutboxReady, nil)
	// Another member's event, pruned too: it is not member 1's newest, and its prune must not
	// make member 1's streams resync.
	other := s.announce(t, 2, 20, media.OutboxReady, nil)
	kept := s.announce(t, 1, 11, media.OutboxReady, nil)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `UPDATE notification_outbox SET relayed_at = statement_timestamp(),
		created_at = statement_timestamp() - interval '8 days' WHERE id = ANY($1)`, []int64{gone, other}); err != nil {
		t.Fatal(err)
	}
	retention, err := webhooks.NewRetention(s.pool, webhooks.RetentionConfig{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := retention.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("Prune removed %d events (%v), want the two old ones", n, err)
	}
	newest := s.announce(t, 1, 12, media.OutboxReady, nil)

	behind := s.open(t, tok, strconv.FormatInt(gone-1, 10))
	e := behind.Next(t)
	if e.Name != events.EventResync || e.ID != strconv.FormatInt(newest, 10) || e.Data.Type != events.EventResync {
		t.Fatalf("resumed from before the retention: first event %q id %q body %+v, want %s with id %d (the newest)",
			e.Name, e.ID, e.Data, events.EventResync, newest)
	}
	later := s.announce(t, 1, 13, media.OutboxReady, nil)
	if e := behind.Next(t); e.ID != strconv.FormatInt(later, 10) {
		t.Errorf("after the resync the stream sent %s %s, want the next new event %d (not the kept ones again)", e.Name, e.ID, later)
	}

	atMark := s.open(t, tok, strconv.FormatInt(gone, 10))
	for _, want := range []int64{kept, newest, later} {
		if e := atMark.Next(t); e.ID != strconv.FormatInt(want, 10) || e.Name == events.EventResync {
			t.Fatalf("resumed at the retention's mark: got %s %s, want event %d (no resync)", e.Name, e.ID, want)
		}
	}
}

// The retention's mark is read with every read of the outbox, not once when a stream resumes:
// a prune that commits after the stream checked where it resumes, and deletes rows it has not
// read yet, must start a resync, not leave a silent gap. The rows the stream has not read are
// stood in for by a row of a kind that has no event (a stream never reads past it), pruned
// while the stream is open; and a stream opened without Last-Event-ID after every row of its
// member was pruned starts after the mark, without a resync.
func TestStream_APruneWhileTheStreamIsOpenStartsAResync(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	ctx := context.Background()
	seen := s.announce(t, 1, 10, media.OutboxReady, nil)
	stream := s.open(t, tok, strconv.FormatInt(seen, 10))
	unread := s.announce(t, 1, 11, "not_an_event", nil)
	if _, err := s.pool.Exec(ctx, `UPDATE notification_outbox SET relayed_at = statement_timestamp(),
		created_at = statement_timestamp() - interval '8 days' WHERE id = $1`, unread); err != nil {
		t.Fatal(err)
	}
	retention, err := webhooks.NewRetention(s.pool, webhooks.RetentionConfig{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := retention.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune removed %d events (%v), want the unread one", n, err)
	}
	next := s.announce(t, 1, 12, media.OutboxReady, nil)
	if e := stream.Next(t); e.Name != events.EventResync || e.ID != strconv.FormatInt(next, 10) {
		t.Fatalf("after a prune past where the open stream had read: got %q id %q, want %s with id %d", e.Name, e.ID, events.EventResync, next)
	}
	then := s.announce(t, 1, 13, media.OutboxReady, nil)
	if e := stream.Next(t); e.Name == events.EventResync || e.ID != strconv.FormatInt(then, 10) {
		t.Fatalf("after the resync: got %q id %q, want event %d", e.Name, e.ID, then)
	}

	// Every row of member 3 pruned: a new stream starts after the mark, quietly.
	only := s.announce(t, 3, 30, media.OutboxReady, nil)
	if _, err := s.pool.Exec(ctx, `UPDATE notification_outbox SET relayed_at = statement_timestamp(),
		created_at = statement_timestamp() - interval '8 days' WHERE id = $1`, only); err != nil {
		t.Fatal(err)
	}
	if _, n, err := retention.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune removed %d events (%v), want member 3's one", n, err)
	}
	fresh := s.open(t, token(t, 3, time.Hour), "")
	later := s.announce(t, 3, 31, media.OutboxReady, nil)
	if e := fresh.Next(t); e.Name == events.EventResync || e.ID != strconv.FormatInt(later, 10) {
		t.Fatalf("a stream opened after all its member's rows were pruned: got %q id %q, want event %d and no resync", e.Name, e.ID, later)
	}
}

func TestStream_RefusesBadRequestsWithJSON(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	cases := []struct {
		name, token, lastID string
		want                int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"expired token", token(t, 1, -time.Minute), "", http.StatusUnauthorized},
		{"Last-Event-ID not a number", tok, "abc", http.StatusBadRequest},
		{"Last-Event-ID negative", tok, "-1", http.StatusBadRequest},
		{"Last-Event-ID past int64", tok, "9223372036854775808", http.StatusBadRequest},
		{"Last-Event-ID with SQL", tok, "1 OR 1=1", http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := s.get(t, c.token, c.lastID)
			defer resp.Body.Close()
			var body struct{ Error string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != c.want || body.Error == "" {
				t.Errorf("status %d body error %q (%v), want %d with a JSON error", resp.StatusCode, body.Error, err, c.want)
			}
		})
	}
}

func TestStream_BoundsPerMemberAndInTotal(t *testing.T) {
	s := start(t, options{perMember: 2, total: 3, heartbeat: 50 * time.Millisecond})
	a := token(t, 1, time.Hour)
	first := s.open(t, a, "")
	s.open(t, a, "")
	refused := func(tok string, want int) {
		t.Helper()
		resp := s.get(t, tok, "")
		defer resp.Body.Close()
		var body struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != want || body.Error == "" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("status %d error %q Retry-After %q, want %d with an error and Retry-After", resp.StatusCode, body.Error,
				resp.Header.Get("Retry-After"), want)
		}
	}
	refused(a, http.StatusTooManyRequests)
	s.open(t, token(t, 2, time.Hour), "")
	refused(token(t, 3, time.Hour), http.StatusServiceUnavailable)

	// A closed stream frees its place once the server sees it gone.
	first.Resp.Body.Close()
	<-first.Ended
	s.waitOpens(t, a, "member 1 still refused after closing a stream")
}

// A client that closes its stream frees its place within about a second, without a write to
// find it gone: with no heartbeat for an hour, a member who reloads a page (one place here,
// four in the binary) opens a stream again at once, rather than when a write fails, two
// heartbeats later (about 45 s in the binary).
func TestStream_AClosedClientFreesItsPlaceWithoutAWrite(t *testing.T) {
	s := start(t, options{perMember: 1, total: 10, heartbeat: time.Hour})
	tok := token(t, 1, time.Hour)
	for reload := range 4 { // each opens a stream once the one before has gone, and closes it
		s.waitOpens(t, tok, fmt.Sprintf("reload %d: the closed stream still holds the member's only place", reload))
	}
}

// A client that sent bytes after its request and then closed frees its place too: no one reads
// those bytes while the stream runs, and a peek at the socket sees them, not the FIN behind
// them, so such a stream held its place until a write failed.
func TestStream_AClientThatClosesWithBytesUnreadFreesItsPlace(t *testing.T) {
	s := start(t, options{perMember: 1, total: 10, heartbeat: time.Hour})
	tok := token(t, 1, time.Hour)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: playhead\r\nAuthorization: Bearer %s\r\n\r\n", tok); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream answered %d, want 200", resp.StatusCode)
	}
	// The stream's first line: the server has read the request and runs the stream.
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("first line of the stream %q, %v; want its retry field", line, err)
	}
	if _, err := io.WriteString(conn, "GET /v1/events HTTP/1.1\r\n"); err != nil { // never read
		t.Fatal(err)
	}
	conn.Close()
	s.waitOpens(t, tok, "a stream whose client closed with bytes unread still holds the member's only place")
}

// waitOpens waits until a stream for tok opens (and closes it), failing with why and the last
// status if none does within ssetest.WaitLimit.
func (s *server) waitOpens(t *testing.T, tok, why string) {
	t.Helper()
	deadline := time.Now().Add(ssetest.WaitLimit)
	for {
		resp := s.get(t, tok, "")
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (%d)", why, resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStream_HeartbeatsKeepALongStreamOpenPastTheWriteTimeout(t *testing.T) {
	// fasthttp gives the whole answer one write deadline (here 500 ms); each write of the stream
	// must push it on, or the stream is cut after 500 ms.
	s := start(t, options{heartbeat: 100 * time.Millisecond, writeTimeout: 500 * time.Millisecond})
	st := s.open(t, token(t, 1, time.Hour), "")
	for range 15 { // 1.5 s of heartbeats: three write timeouts
		select {
		case <-st.Comments:
		case <-st.Ended:
			t.Fatalf("the stream ended (%v) during its heartbeats", st.Err)
		case <-time.After(ssetest.WaitLimit):
			t.Fatal("no heartbeat")
		}
	}
	id := s.announce(t, 1, 10, media.OutboxReady, nil)
	if e := st.Next(t); e.ID != strconv.FormatInt(id, 10) {
		t.Errorf("event %s, want %d", e.ID, id)
	}
}

func TestStream_EndsWhenItsTokenExpires(t *testing.T) {
	s := start(t, options{})
	st := s.open(t, token(t, 1, 2*time.Second), "")
	st.WaitEnd(t)
	if !errors.Is(st.Err, io.EOF) {
		t.Errorf("the stream ended with %v, want a clean end (EOF) at the token's expiry", st.Err)
	}
}

func TestStream_StopEndsStreamsAndRefusesNewOnes(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	st := s.open(t, tok, "")
	ctx, cancel := context.WithTimeout(context.Background(), ssetest.WaitLimit)
	defer cancel()
	if err := s.hub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st.WaitEnd(t)
	resp := s.get(t, tok, "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a stream opened after Stop: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestStream_CatchesUpAfterTheListenerReconnects(t *testing.T) {
	s := start(t, options{})
	st := s.open(t, token(t, 1, time.Hour), "")
	// Kill the LISTEN connection and write an event at once: its notification is lost while the
	// listener is away (it reconnects after a second), and the stream must read it on reconnect.
	if _, err := s.pool.Exec(context.Background(),
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'listen %'`); err != nil {
		t.Fatal(err)
	}
	id := s.announce(t, 1, 10, media.OutboxReady, nil)
	if e := st.Next(t); e.ID != strconv.FormatInt(id, 10) {
		t.Errorf("event %s, want %d", e.ID, id)
	}
}

func TestStream_DeliversAnEventItsReadMissedOnceTheDatabaseIsBack(t *testing.T) {
	// The notification arrives (the listener's connection is fine) while the stream's read of
	// the outbox fails (its pool cannot reach the database): the stream must read again later
	// by itself, since no other notification may ever come.
	s := start(t, options{readsViaProxy: true})
	st := s.open(t, token(t, 1, time.Hour), "")
	s.readProxy.Refuse(true)
	s.readProxy.ResetAll()
	id := s.announce(t, 1, 10, media.OutboxReady, nil)
	waitLogged(t, s.logs, "reading the outbox failed")
	s.readProxy.Refuse(false)
	if e := st.Next(t); e.ID != strconv.FormatInt(id, 10) {
		t.Errorf("event %s, want %d", e.ID, id)
	}
}

func TestStream_ResumeSendsEveryEventPastOneRead(t *testing.T) {
	// A client that was away for a while resumes behind by more events than one read of the
	// outbox returns (100): it gets all of them in order, without waiting for a new event.
	s := start(t, options{})
	const behind = 250
	rows, err := s.pool.Query(context.Background(), `
		INSERT INTO notification_outbox (member_id, media_id, kind)
		SELECT 1, g, $1 FROM generate_series(1, $2::int) AS g RETURNING id`, media.OutboxReady, behind)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	st := s.open(t, token(t, 1, time.Hour), strconv.FormatInt(ids[0]-1, 10))
	for i, want := range ids {
		if e := st.Next(t); e.ID != strconv.FormatInt(want, 10) {
			t.Fatalf("event %d of %d: id %s, want %d", i+1, behind, e.ID, want)
		}
	}
}
