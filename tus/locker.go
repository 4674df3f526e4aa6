package tus

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/playhead/playhead/notify"
)

// ChannelRelease is the notification channel on which a request that waits for an upload's lock
// asks the node holding it to let go; the payload is the upload id.
const ChannelRelease = "tus_release"

// Locker is tusd's handler.Locker on PostgreSQL session advisory locks, so that two requests
// for one upload never write at once, whichever nodes they reach.
//
// Every lock of a node is held by one session (a connection of the direct pool, as the orphan
// sweep's lock: a transaction pooler would hand the session to others). An upload's key is
// hashtextextended('tus upload ' || id, 0), as the webhook relay keys its chains. A request
// on the same node finds the lock in the node's own table first: advisory locks are reentrant
// within a session, so PostgreSQL alone would let the node's second request in.
//
// A PATCH that finds the lock taken is refused at once with 423 (two clients writing one upload:
// one of them loses at once, tus-js-client retries 423). A HEAD or DELETE waits: it asks the
// holder to let go, directly on this node and by a notification on ChannelRelease on another.
// A holder with a body drains it: it reads on as long as bytes keep coming without a pause of
// drainGrace, for at most drainFor, and then tusd's requestUnlock stops it; it stores what it
// received and unlocks. That is how a client resuming after a dropped connection takes its
// upload back from the request the server still reads for it, without sending again the bytes
// that were already in the server's socket.
//
// If the session fails, PostgreSQL has released its locks: every request holding one here is
// told to let go, and a new session is taken for the next lock. A request that writes on
// anyway cannot corrupt the upload: its offset moves only by a compare-and-set, and parts are
// never overwritten (store.go).
type Locker struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	// Poll is how often a waiting request tries the lock again. Default 50 ms.
	Poll time.Duration

	// mu guards the session and the table of held locks; lock, unlock and release requests
	// take it, from request goroutines and the listener's.
	mu      sync.Mutex
	session *pgxpool.Conn
	held    map[string]*holder // upload id → the request holding its lock
	stopped bool
}

// holder is the request of this node holding an upload's lock.
type holder struct {
	// requestUnlock is tusd's: it stops the request's body at once.
	requestUnlock func()
	// drain, for a request with a body, ends the body once what has arrived is read.
	drain func()
	// asked is set at the first request to let go; stop ends the request if it has not let go
	// drainFor after it. Both under the Locker's mu.
	asked bool
	stop  *time.Timer
}

// drainFor is how long a request with a body, asked to let go of its lock, may go on reading
// what arrives before tusd stops it: the bytes already on their way are kept, and a client that
// still sends (another tab uploading the same file) cannot keep the lock.
const drainFor = 2 * time.Second

// drainGrace is how long a draining body may wait for its next bytes: past it the body has
// nothing more on its way.
const drainGrace = 200 * time.Millisecond

// letGo asks h to let go. Called with the Locker's mu held.
func (h *holder) letGo() {
	if h.asked {
		return
	}
	h.asked = true
	if h.drain == nil {
		h.requestUnlock()
		return
	}
	h.drain()
	h.stop = time.AfterFunc(drainFor, h.requestUnlock)
}

// NewLocker returns a Locker whose session comes from pool (a pool with sessions of its own:
// PLAYHEAD_DATABASE_DIRECT_URL), taken at the first lock.
func NewLocker(pool *pgxpool.Pool, logger *slog.Logger) *Locker {
	return &Locker{pool: pool, logger: logger, Poll: 50 * time.Millisecond, held: map[string]*holder{}}
}

// NewLock returns the lock of upload id.
func (l *Locker) NewLock(id string) (handler.Lock, error) { return &lock{l: l, id: id}, nil }

// Release is the listener's handler of ChannelRelease: the request of this node holding the
// lock of upload id, if any, is asked to let go.
func (l *Locker) Release(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[id]; h != nil {
		h.letGo()
	}
}

// Start does nothing: the session is taken at the first lock.
func (l *Locker) Start(context.Context) error { return nil }

// Stop closes the session, which releases any lock it still holds: called after the public
// server's stop, when no request holds one.
func (l *Locker) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.dropSession(ctx)
	return nil
}

// sessionQueryTimeout bounds a query of the lock session: past it the session is taken for
// failed.
const sessionQueryTimeout = 5 * time.Second

var errLockWaitTimeout = handler.NewError("ERR_UPLOAD_LOCKED", "another request for this upload is running and did not let go in time; try again", http.StatusLocked)

type lock struct {
	l  *Locker
	id string
}

// Lock takes the lock, or fails with 423: at once for a PATCH, after asking the holder to let
// go and waiting until ctx ends (tusd's AcquireLockTimeout) for the others.
func (k *lock) Lock(ctx context.Context, requestUnlock func()) error {
	wait := true
	if st := requestFrom(ctx); st != nil {
		wait = st.waitForLock
	}
	var asked time.Time
	for {
		ok, err := k.l.tryLock(ctx, k.id, requestUnlock)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if !wait {
			return handler.ErrFileLocked
		}
		if time.Since(asked) > time.Second { // ask again now and then: a notification may be lost
			k.l.askRelease(ctx, k.id)
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			return errLockWaitTimeout
		case <-time.After(k.l.Poll):
		}
	}
}

// Unlock releases the lock.
func (k *lock) Unlock() error {
	return k.l.unlock(k.id)
}

func (l *Locker) tryLock(ctx context.Context, id string, requestUnlock func()) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false, handler.ErrServerShutdown
	}
	if _, ok := l.held[id]; ok {
		return false, nil
	}
	if l.session == nil {
		session, err := l.pool.Acquire(ctx)
		if err != nil {
			return false, fmt.Errorf("upload lock session: %w", err)
		}
		l.session = session
	}
	// Not the request's context: pgx closes a connection whose query is cancelled, and with it
	// would go every lock of the node.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionQueryTimeout)
	defer cancel()
	var ok bool
	if err := l.session.QueryRow(qctx, `SELECT pg_try_advisory_lock(hashtextextended('tus upload ' || $1, 0))`, id).Scan(&ok); err != nil {
		l.sessionFailed(ctx, err)
		return false, fmt.Errorf("take the upload's lock: %w", err)
	}
	if ok {
		h := &holder{requestUnlock: requestUnlock}
		if st := requestFrom(ctx); st != nil && st.drain != nil {
			h.drain = st.drain
		}
		l.held[id] = h
	}
	return ok, nil
}

func (l *Locker) unlock(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[id]
	if !ok {
		return nil // lost with a failed session
	}
	if h.stop != nil {
		h.stop.Stop()
	}
	delete(l.held, id)
	// A fresh context: the request's may be over, and a lock left held would block the upload
	// until the session ends.
	ctx, cancel := context.WithTimeout(context.Background(), sessionQueryTimeout)
	defer cancel()
	var released bool
	err := l.session.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended('tus upload ' || $1, 0))`, id).Scan(&released)
	if err != nil {
		l.sessionFailed(ctx, err)
		return fmt.Errorf("release the upload's lock: %w", err)
	}
	return nil
}

// askRelease asks the holder of upload id's lock to let go: here, or on another node.
func (l *Locker) askRelease(ctx context.Context, id string) {
	l.mu.Lock()
	h := l.held[id]
	if h != nil {
		h.letGo()
	}
	l.mu.Unlock()
	if h != nil {
		return
	}
	if err := notify.Send(ctx, l.pool, ChannelRelease, id); err != nil && ctx.Err() == nil {
		l.logger.Warn("could not ask for an upload's lock", "err", err)
	}
}

// sessionFailed drops a session that failed: PostgreSQL released its locks with it, so every
// holder here is told to let go. Called with mu held.
func (l *Locker) sessionFailed(ctx context.Context, err error) {
	l.logger.Warn("upload lock session failed; its locks are released", "err", err, "held", len(l.held))
	for id, h := range l.held {
		if h.stop != nil {
			h.stop.Stop()
		}
		h.requestUnlock()
		delete(l.held, id)
	}
	l.dropSession(ctx)
}

// dropSession closes the session (never back into the pool: it may hold locks). Called with mu
// held.
func (l *Locker) dropSession(ctx context.Context) {
	if l.session == nil {
		return
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.session.Conn().Close(closeCtx)
	l.session.Release()
	l.session = nil
}
