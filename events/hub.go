// Package events streams each member's media events (media.ready, media.failed: the rows of the
// notification outbox) to their own clients as Server-Sent Events, GET /v1/events, so a page
// learns that an upload finished without polling.
//
// The outbox is the source of truth and the stream only reads it: every event is the outbox
// row's id (the SSE id), its type and the same JSON body a webhook carries. A NOTIFY on
// media.ChannelOutbox, sent in the transaction that writes the row, names the member; the node
// holding that member's streams wakes them, and each reads the member's rows after the last one
// it sent. A client that reconnects sends Last-Event-ID and gets every row after it, whichever
// node it reaches, so a stream broken by a network failure or a node's stop loses nothing. When
// the listening connection comes back after a failure, every stream reads again (notifications
// sent while it was down are lost; the rows are not).
//
// Streams are bounded per member and in total, end when the token that opened them expires,
// and are closed when the node stops, before the public server waits for its connections.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// Config configures a Hub.
type Config struct {
	// Pool reads the outbox.
	Pool *pgxpool.Pool
	// PerMember and Total bound the open streams of one member and of the node.
	PerMember, Total int
	// Heartbeat is how often an idle stream sends a comment line: it keeps proxies from closing
	// the connection and finds clients that went away.
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a client; a client that reads no faster is cut.
	WriteTimeout time.Duration
	// Registerer receives the metrics. Optional.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Hub holds a node's open event streams.
type Hub struct {
	cfg Config

	// refused says whether a member's streams are refused (an erased member). Set by Refuse
	// before the hub serves; nil refuses no one.
	refused func(member int64) bool

	mu      sync.Mutex
	members map[int64]map[*stream]struct{}
	open    int
	closed  bool

	// stopped is closed by Stop: every stream ends.
	stopped chan struct{}
	// ctx is the streams' database calls' context, cancelled by Stop.
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup

	metrics metrics
}

// stream is one open GET /v1/events.
type stream struct {
	member int64
	// conn is the client's connection, whose write deadline the stream pushes on and Stop cuts.
	conn net.Conn
	// wake holds one pending wake-up: new rows may be in the outbox.
	wake chan struct{}
	// ended is closed by End (the member was erased); endOnce guards the close.
	ended   chan struct{}
	endOnce sync.Once
}

func (s *stream) poke() {
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending; it reads every new row
	}
}

// NewHub returns a Hub; Register adds its route and Notify and Resync feed it.
func NewHub(cfg Config) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{cfg: cfg, members: make(map[int64]map[*stream]struct{}), stopped: make(chan struct{}), ctx: ctx, cancel: cancel,
		metrics: newMetrics()}
	if cfg.Registerer != nil {
		h.metrics.register(cfg.Registerer)
	}
	return h
}

// Notify wakes the streams of the member named by payload (a notification on
// media.ChannelOutbox).
func (h *Hub) Notify(payload string) {
	member, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		return // not a member id: nothing of ours
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.members[member] {
		s.poke()
	}
}

// Resync wakes every stream: called when the listening connection is (re)established, since
// notifications sent while it was down are lost.
func (h *Hub) Resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, streams := range h.members {
		for s := range streams {
			s.poke()
		}
	}
}

// Refuse makes the hub refuse (401) a stream of a member refused reports, checked under the
// lock End takes: a request whose token passed auth before its member's erasure reached this
// node, and which subscribes after End ran, is refused instead of staying open until its token
// expires. refused must report the member before End is called for them (erasure.Set adds an
// id before it runs its hooks). Call it before the hub serves.
func (h *Hub) Refuse(refused func(member int64) bool) { h.refused = refused }

// End ends every stream of members (erased members: package erasure) and returns how many.
// Their clients' reconnections are refused by the token check.
func (h *Hub) End(members []int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range members {
		for s := range h.members[m] {
			s.endOnce.Do(func() { close(s.ended) })
			n++
		}
	}
	return n
}

// Start does nothing: streams start with their requests. It makes the Hub a service, whose Stop
// comes before the public server's.
func (h *Hub) Start(context.Context) error { return nil }

// stopWriteGrace is how long a stream's last bytes may take to reach its client once the node
// stops; a stream still writing then is cut.
const stopWriteGrace = time.Second

// Stop ends every stream and refuses new ones (503), then waits for the streams to finish
// their last write, within ctx. Clients reconnect, to another node, with Last-Event-ID.
//
// A stream whose client stopped reading is blocked in a write (fasthttp copies the stream to
// the connection in its own goroutine, the stream waits on that copy) and sees neither the stop
// nor the cancelled reads: its connection's write deadline is moved to stopWriteGrace from now,
// so the blocked write fails then instead of after WriteTimeout, which may be longer than the
// whole graceful stop.
func (h *Hub) Stop(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stopped)
		h.cancel()
		last := time.Now().Add(stopWriteGrace)
		for _, streams := range h.members {
			for s := range streams {
				_ = s.conn.SetWriteDeadline(last) // fails only on a closed connection, which needs no cut
			}
		}
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("event streams still writing: %w", ctx.Err())
	}
}

// subscribe opens a stream for member, writing to conn, within the bounds.
func (h *Hub) subscribe(member int64, conn net.Conn) (*stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		h.metrics.refused.WithLabelValues("stopping").Inc()
		return nil, apperr.Errorf(apperr.Unavailable, "the server is stopping; reconnect")
	case len(h.members[member]) >= h.cfg.PerMember:
		h.metrics.refused.WithLabelValues("member").Inc()
		return nil, apperr.Errorf(apperr.TooManyRequests, "at most %d event streams per member are open at once; close one first", h.cfg.PerMember)
	case h.open >= h.cfg.Total:
		h.metrics.refused.WithLabelValues("total").Inc()
		return nil, apperr.Errorf(apperr.Unavailable, "the server holds as many event streams as it allows (%d); retry later", h.cfg.Total)
	case h.refused != nil && h.refused(member):
		return nil, apperr.Errorf(apperr.Unauthenticated, "this member is erased; sign in as another member")
	}
	s := &stream{member: member, conn: conn, wake: make(chan struct{}, 1), ended: make(chan struct{})}
	if h.members[member] == nil {
		h.members[member] = make(map[*stream]struct{})
	}
	h.members[member][s] = struct{}{}
	h.open++
	h.running.Add(1)
	h.metrics.open.Inc()
	return s, nil
}

// unsubscribe closes s.
func (h *Hub) unsubscribe(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.members[s.member], s)
	if len(h.members[s.member]) == 0 {
		delete(h.members, s.member)
	}
	h.open--
	h.running.Done()
	h.metrics.open.Dec()
}

// extendWrite pushes s's write deadline WriteTimeout on, before each flush: fasthttp sets one
// deadline for the whole answer, which would cut a long stream. Once the hub is stopping the
// deadline is Stop's and stays: a stream writing its last bytes must not push it back.
func (h *Hub) extendWrite(s *stream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	return s.conn.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
}

// readBatch is how many outbox rows one read sends at most; a stream behind by more reads
// again at once.
const readBatch = 100

// readTimeout bounds one read of the outbox.
const readTimeout = 5 * time.Second

// latest returns where a stream opened without Last-Event-ID starts: after member's newest
// outbox row, or after the retention's mark if that is higher (every row of member's was
// pruned), so that the stream does not start with a resync.
func (h *Hub) latest(ctx context.Context, member int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	var id int64
	err := h.cfg.Pool.QueryRow(ctx, latestSQL, member).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("read the newest outbox row of member %d: %w", member, err)
	}
	return id, nil
}

// latestSQL is member $1's newest outbox id or its retention mark, whichever is higher.
const latestSQL = `
SELECT greatest(
    coalesce((SELECT max(id) FROM notification_outbox WHERE member_id = $1), 0),
    coalesce((SELECT pruned_through FROM outbox_retention WHERE member_id = $1), 0))`

// afterSQL reads, in one statement (one snapshot), member $1's retention mark and its rows of
// the event kinds $3 with an id above $2, oldest first, at most $4. A prune deletes rows and
// moves the mark in one transaction, so a batch that misses pruned rows sees the mark that
// says so.
const afterSQL = `
SELECT m.mark, o.id, o.kind, o.media_id, o.member_id, o.created_at, o.payload
FROM (SELECT coalesce((SELECT pruned_through FROM outbox_retention WHERE member_id = $1), 0) AS mark) m
LEFT JOIN LATERAL (
    SELECT id, kind, media_id, member_id, created_at, payload FROM notification_outbox
    WHERE member_id = $1 AND id > $2 AND kind = ANY($3)
    ORDER BY id LIMIT $4) o ON true`

// after returns member's outbox rows with an id above id that have an event type, oldest
// first, at most readBatch; or, when the retention pruned a row of member's above id, no rows
// and resyncTo, where the stream goes on after a resync event: member's newest row or the
// retention's mark, whichever is higher. It is checked with every read, not only when a
// stream resumes: a prune that commits between a resumption and its first read must not
// leave a silent gap.
func (h *Hub) after(member, id int64) (rows []media.OutboxRow, resyncTo int64, err error) {
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	kinds, _ := media.OutboxKinds()
	found, err := h.cfg.Pool.Query(ctx, afterSQL, member, id, kinds, readBatch)
	if err != nil {
		return nil, 0, err
	}
	var mark int64
	for found.Next() {
		var (
			r                      media.OutboxRow
			rowID, medium, account *int64
			kind                   *string
			created                *time.Time
		)
		// A member with no rows above id gets one row of NULLs beside its mark.
		if err := found.Scan(&mark, &rowID, &kind, &medium, &account, &created, &r.Payload); err != nil {
			found.Close()
			return nil, 0, err
		}
		if rowID != nil {
			r.ID, r.Kind, r.MediaID, r.MemberID, r.CreatedAt = *rowID, *kind, *medium, *account, *created
			rows = append(rows, r)
		}
	}
	if err := found.Err(); err != nil {
		return nil, 0, err
	}
	if mark <= id {
		return rows, 0, nil
	}
	// Rows above id may be gone: go on from the newest, whose read may see rows written since
	// the batch (the client reads its state after the resync, which includes them).
	resyncTo, err = h.latest(ctx, member)
	return nil, max(resyncTo, mark), err
}

type metrics struct {
	open    prometheus.Gauge
	refused *prometheus.CounterVec
	sent    prometheus.Counter
	resyncs prometheus.Counter
	ended   *prometheus.CounterVec
}

func newMetrics() metrics {
	return metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "playhead", Subsystem: "events", Name: "streams_open",
			Help: "GET /v1/events streams open on this node.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "events", Name: "streams_refused_total",
			Help: "GET /v1/events refused by reason: member (PLAYHEAD_EVENTS_PER_MEMBER), total (PLAYHEAD_EVENTS_MAX_STREAMS), stopping.",
		}, []string{"reason"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "events", Name: "sent_total",
			Help: "Events written to event streams.",
		}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "events", Name: "resyncs_total",
			Help: "Streams resumed from a Last-Event-ID older than the outbox retention, which began with a resync event.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "events", Name: "streams_ended_total",
			Help: "Event streams ended by reason: client (it went away or read too slowly), expired (its token), erased (its member), stopping.",
		}, []string{"reason"}),
	}
}

func (m metrics) register(r prometheus.Registerer) {
	r.MustRegister(m.open, m.refused, m.sent, m.resyncs, m.ended)
	for _, reason := range []string{"member", "total", "stopping"} {
		m.refused.WithLabelValues(reason)
	}
	for _, reason := range []string{"client", "expired", "erased", "stopping"} {
		m.ended.WithLabelValues(reason)
	}
}
