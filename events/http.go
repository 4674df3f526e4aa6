package events

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// Register adds GET /events to r, a group behind the token check.
func (h *Hub) Register(r fiber.Router) {
	httpserver.Get(r, "/events", h.serve)
}

// reconnectMillis is the SSE retry field: how long a browser's EventSource waits before it
// reconnects after the stream ends.
const reconnectMillis = 3000

// retryAfterSeconds is the Retry-After of a refused stream.
const retryAfterSeconds = 5

// clientCheckInterval is how often a stream looks whether its client has closed the
// connection, so that its place (PLAYHEAD_EVENTS_PER_MEMBER) is free again within about this
// long of a page's reload.
const clientCheckInterval = time.Second

// retryReadAfter is how long a stream waits to read the outbox again after a read failed (the
// database is away); notifications missed meanwhile are made good by that read.
const retryReadAfter = 5 * time.Second

// serve opens a stream: the caller's events after Last-Event-ID, or, without one, those written
// from now on. The answer's status and headers go out before the first event; errors before
// that (a bad Last-Event-ID, a bound, a database that does not answer) are JSON like any other.
func (h *Hub) serve(c *fiber.Ctx) error {
	caller := auth.From(c)
	after, resume, err := lastEventID(c.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	s, err := h.subscribe(caller.MemberID, c.Context().Conn())
	if err != nil {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
		return err
	}
	// Subscribed first, then the starting point read: a row written in between is after it and
	// its notification wakes s, so nothing falls between the two. A stream resuming from
	// Last-Event-ID reads at once; if the retention pruned what it would read, its first read
	// says so and it starts with a resync event (after).
	if resume {
		s.poke()
	} else if after, err = h.latest(c.UserContext(), caller.MemberID); err != nil {
		h.unsubscribe(s)
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // proxies that buffer answers (nginx) pass this one through at once
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer h.unsubscribe(s)
		h.metrics.ended.WithLabelValues(h.send(s, after, caller.Expires, w)).Inc()
	})
	return nil
}

// lastEventID reads the Last-Event-ID header: resume is false when there is none (or it is
// empty, as EventSource may send it), and a value that is not an event id is refused.
func lastEventID(raw string) (id int64, resume bool, err error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, false, nil
	}
	id, err = strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		return 0, false, apperr.Errorf(apperr.Invalid, "Last-Event-ID must be the id of an event this stream sent (a non-negative integer), got %q", httpserver.Excerpt(raw))
	}
	return id, true, nil
}

// send writes s's events after after to w, or a resync event where the retention pruned them
// (Hub.after), until the client goes
// away, the token expires, the member is erased (Hub.End) or the node stops, and returns which of these ended it (the metric's
// reason). Every flush extends the connection's write deadline (extendWrite).
func (h *Hub) send(s *stream, after int64, expires time.Time, w *bufio.Writer) string {
	flush := func() error {
		if err := h.extendWrite(s); err != nil {
			return err
		}
		return w.Flush()
	}
	// The first bytes let the client see the stream open (fetch resolves, EventSource fires
	// "open") before any event exists.
	if _, err := w.WriteString("retry: " + strconv.Itoa(reconnectMillis) + "\n\n"); err != nil {
		return "client"
	}
	if flush() != nil {
		return "client"
	}
	heartbeat := time.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	goneCheck := time.NewTicker(clientCheckInterval)
	defer goneCheck.Stop()
	expiry := time.NewTimer(time.Until(expires))
	defer expiry.Stop()
	for {
		select {
		case <-h.stopped:
			return "stopping"
		case <-s.ended:
			return "erased"
		case <-expiry.C:
			return "expired"
		case <-goneCheck.C:
			if clientGone(s.conn) {
				return "client"
			}
		case <-heartbeat.C:
			if _, err := w.WriteString(": keep-alive\n\n"); err != nil || flush() != nil {
				return "client"
			}
		case <-s.wake:
			for {
				rows, resyncTo, err := h.after(s.member, after)
				if err != nil {
					if h.ctx.Err() != nil {
						return "stopping"
					}
					h.cfg.Logger.Debug("event stream: reading the outbox failed; retrying", "member", s.member, "err", err)
					time.AfterFunc(retryReadAfter, s.poke)
					break
				}
				if resyncTo > 0 {
					writeResync(w, resyncTo)
					after = resyncTo
					h.metrics.resyncs.Inc()
					if err := flush(); err != nil {
						return "client"
					}
					continue // then what came after it
				}
				for _, r := range rows {
					writeEvent(w, r)
					after = r.ID
				}
				if len(rows) > 0 {
					if err := flush(); err != nil {
						return "client"
					}
					h.metrics.sent.Add(float64(len(rows)))
				}
				if len(rows) < readBatch {
					break
				}
			}
		}
	}
}

// EventResync is the type of the event a stream starts with when its Last-Event-ID is older
// than what the retention kept (PLAYHEAD_OUTBOX_RETENTION): events after it may be gone, so
// the client reads the state it follows again (GET /v1/media/{id}). Its id is the caller's
// newest event, where the stream goes on from.
const EventResync = "resync"

// writeResync writes the resync event, whose id is the newest event of the caller (after).
func writeResync(w *bufio.Writer, after int64) {
	w.WriteString("id: " + strconv.FormatInt(after, 10) + "\nevent: " + EventResync +
		"\ndata: {\"type\":\"" + EventResync + "\",\"reason\":\"events after Last-Event-ID are older than the retention and may be gone: read the state again\"}\n\n")
}

// writeEvent writes one outbox row as an SSE event: its id (what Last-Event-ID resumes from),
// its type, and the same JSON body a webhook carries, on one line.
func writeEvent(w *bufio.Writer, r media.OutboxRow) {
	body, _ := json.Marshal(r.Body()) // cannot fail: strings, numbers and times
	w.WriteString("id: " + strconv.FormatInt(r.ID, 10) + "\nevent: " + media.EventType(r.Kind) + "\ndata: ")
	w.Write(body)
	w.WriteString("\n\n")
}
