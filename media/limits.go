package media

import (
	"cmp"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
)

// UploadLimits are what every upload route of a node shares: how many uploads may be in
// progress, of one member and of everyone, and how long a body may go silent or take in all.
//
// An upload holds a connection, a file descriptor and a storage write for as long as its client
// takes; without these limits a member could hold hundreds by trickling a byte every few
// seconds. The count is per node and shared by POST /v1/media and the PATCHes of resumable
// uploads, so a member cannot double its share by mixing the two. The limits apply when the
// handler runs, so the routes must be first-byte routes of the app
// (httpserver.Config.FirstByteRoutes): otherwise fasthttp reads 8 KiB of each body first, and
// uploads that trickle those are never counted.
type UploadLimits struct {
	// MaxPerMember and MaxTotal bound the uploads in progress on this node, of one member and
	// of everyone; beyond them the upload is refused 429 with Retry-After. Defaults 2 and 32.
	MaxPerMember, MaxTotal int
	// IdleTimeout cuts an upload whose client sends nothing for this long (408). A slow but
	// steady upload is never cut by it. Default 30 s.
	IdleTimeout time.Duration
	// Timeout is how long one request's body may take to arrive (408 beyond). The server's read
	// timeout is far shorter, to keep slow clients off every other route. Default 1 h.
	Timeout time.Duration

	slots uploadSlots
}

func (l *UploadLimits) withDefaults() {
	l.MaxPerMember, l.MaxTotal = cmp.Or(l.MaxPerMember, 2), cmp.Or(l.MaxTotal, 32)
	l.IdleTimeout, l.Timeout = cmp.Or(l.IdleTimeout, 30*time.Second), cmp.Or(l.Timeout, time.Hour)
}

// uploadRetryAfter is the Retry-After of a refused upload: a guess, since how long the uploads
// in progress take is up to their clients; long enough not to invite a retry storm.
const uploadRetryAfter = 10 * time.Second

// Acquire takes a place for an upload of member, or answers c's request 429 with Retry-After
// (the error to return) when the member or the node has no place left. Requests that give the
// same non-empty key share one place: the PATCHes of one resumable upload, of which a new one
// may arrive (after a dropped connection) while the server still reads the old. release gives
// the place back; it is safe to call more than once.
func (l *UploadLimits) Acquire(c *fiber.Ctx, member int64, key string) (release func(), err error) {
	l.withDefaults()
	release, ok := l.slots.acquire(member, key, l.MaxPerMember, l.MaxTotal)
	if !ok {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(uploadRetryAfter/time.Second)))
		return nil, apperr.Errorf(apperr.TooManyRequests, "too many uploads in progress; try again when one has finished")
	}
	return release, nil
}

// uploadSlots counts the uploads in progress, per member and in total.
type uploadSlots struct {
	mu        sync.Mutex
	total     int
	perMember map[int64]int
	// shared counts the requests holding each keyed place.
	shared map[slotKey]int
}

type slotKey struct {
	member int64
	key    string
}

// acquire takes a place for member unless it already holds perMember or everyone holds total;
// a non-empty key already held by member is shared instead.
func (s *uploadSlots) acquire(member int64, key string, perMember, total int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perMember == nil {
		s.perMember, s.shared = map[int64]int{}, map[slotKey]int{}
	}
	k := slotKey{member, key}
	if key == "" || s.shared[k] == 0 {
		if s.total >= total || s.perMember[member] >= perMember {
			return nil, false
		}
		s.total++
		s.perMember[member]++
	}
	if key != "" {
		s.shared[k]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if key != "" {
				if s.shared[k]--; s.shared[k] > 0 {
					return
				}
				delete(s.shared, k)
			}
			s.total--
			if s.perMember[member]--; s.perMember[member] == 0 {
				delete(s.perMember, member)
			}
		})
	}, true
}

// The errors an UploadBody's Read returns when its limits cut it.
var (
	ErrUploadStalled = errors.New("upload sent nothing for the idle timeout")
	ErrUploadTooSlow = errors.New("upload took longer than its time limit")
	// ErrUploadInterrupted: Interrupt was called.
	ErrUploadInterrupted = errors.New("upload interrupted by the server")
)

// UploadBody is an upload's request body read with a read deadline pushed forward before
// every read: a client that sends nothing for IdleTimeout is cut (ErrUploadStalled), one that
// keeps sending however slowly is not, up to the request's absolute deadline
// (ErrUploadTooSlow). Interrupt ends it from another goroutine.
type UploadBody struct {
	r        io.Reader
	conn     net.Conn // nil for a body fasthttp has read already
	idle     time.Duration
	deadline time.Time

	// mu orders Interrupt and Drain against the deadline a Read sets, so that a Read that
	// starts after Interrupt fails at once and one blocked in the connection returns.
	mu          sync.Mutex
	interrupted bool
	// drain, once Drain was called, is how long a Read may wait for bytes before the body ends.
	drain time.Duration
}

// Body returns the request body of c's upload, limited by l's timeouts from now.
func (l *UploadLimits) Body(c *fiber.Ctx, body io.Reader) *UploadBody {
	l.withDefaults()
	return &UploadBody{r: body, conn: c.Context().Conn(), idle: l.IdleTimeout, deadline: time.Now().Add(l.Timeout)}
}

// Read reads the body.
func (b *UploadBody) Read(p []byte) (int, error) {
	next, cause := time.Now().Add(b.idle), ErrUploadStalled
	if b.deadline.Before(next) {
		next, cause = b.deadline, ErrUploadTooSlow
	}
	b.mu.Lock()
	if b.interrupted {
		b.mu.Unlock()
		return 0, ErrUploadInterrupted
	}
	if b.drain > 0 {
		next, cause = time.Now().Add(b.drain), io.EOF
	}
	if b.conn != nil {
		if err := b.conn.SetReadDeadline(next); err != nil {
			b.mu.Unlock()
			return 0, err
		}
	}
	b.mu.Unlock()
	n, err := b.r.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.mu.Lock()
		switch {
		case b.interrupted:
			cause = ErrUploadInterrupted
		case b.drain > 0:
			cause = io.EOF
		}
		b.mu.Unlock()
		err = cause
	}
	return n, err
}

// Drain ends the body early but keeps what has arrived: from now on a Read that waits longer
// than grace for bytes ends the body (io.EOF), and one that finds bytes waiting returns them.
// A resumable upload asked to let go of its lock drains its body rather than drop it: the
// bytes of a client whose connection broke are still in the socket, and are not sent again
// (dropping them, a cut upload on S3 was measured losing 12 MB: the bytes that arrived while
// it waited on a part).
func (b *UploadBody) Drain(grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drain > 0 || b.interrupted {
		return
	}
	b.drain = grace
	if b.conn != nil {
		_ = b.conn.SetReadDeadline(time.Now().Add(grace))
	}
}

// Interrupt makes a Read blocked on the connection return, and every later Read fail, with
// ErrUploadInterrupted. It may be called from any goroutine, more than once.
func (b *UploadBody) Interrupt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.interrupted = true
	if b.conn != nil {
		_ = b.conn.SetReadDeadline(time.Now())
	}
}

// uploadCutError is the answer to a body that UploadBody's limits cut, or nil for any other
// error.
func (l *UploadLimits) uploadCutError(err error) error {
	switch {
	case errors.Is(err, ErrUploadStalled):
		return apperr.Errorf(apperr.Timeout, "the upload sent nothing for %s", l.IdleTimeout)
	case errors.Is(err, ErrUploadTooSlow):
		return apperr.Errorf(apperr.Timeout, "the upload took longer than %s", l.Timeout)
	}
	return nil
}
