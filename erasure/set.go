package erasure

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Set is one node's copy of the erased member ids, for prompt answers: the auth middleware
// refuses their tokens (401) before the token cache, and every erasure that reaches the node
// runs the OnErase hooks (drop the member's buffered positions, close their event streams).
// The database's fence is what keeps an erased member's data from coming back; the Set only
// makes the node answer and free memory at once.
//
// It holds every erased id, read in full at Start and each time the listening connection is
// (re)established (Reload; notifications sent while it was down are lost), and one by one from
// Channel: about 40 bytes per id in the map, so a million erasures take about 40 MiB.
type Set struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	// onErase are called with the ids the Set learns of, each id once. Set by OnErase before
	// Start; read by the listener's goroutine and Start.
	onErase []func(members []int64)

	mu     sync.RWMutex
	erased map[int64]struct{}
}

// NewSet returns an empty Set that reads member_erasures on pool.
func NewSet(pool *pgxpool.Pool, logger *slog.Logger) *Set {
	if logger == nil {
		logger = slog.Default()
	}
	return &Set{pool: pool, logger: logger, erased: make(map[int64]struct{})}
}

// OnErase adds a hook called with the erased ids the Set learns of, in one call per read
// (Start and Reload pass the ids it did not hold; a notification passes one). Call it before
// Start.
func (s *Set) OnErase(f func(members []int64)) { s.onErase = append(s.onErase, f) }

// Contains reports whether member is erased, as far as this node knows.
func (s *Set) Contains(member int64) bool {
	s.mu.RLock()
	_, ok := s.erased[member]
	s.mu.RUnlock()
	return ok
}

// Start reads every erased id. It makes the Set a service that starts before the public
// server: a node never answers a token of a member erased before it started.
func (s *Set) Start(ctx context.Context) error { return s.load(ctx) }

// Stop does nothing.
func (s *Set) Stop(context.Context) error { return nil }

// Notified adds the id a notification on Channel carries.
func (s *Set) Notified(payload string) {
	member, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		return
	}
	s.add([]int64{member})
}

// Reload reads every erased id again: the listener calls it on each (re)connection.
func (s *Set) Reload() {
	if err := s.load(context.Background()); err != nil {
		s.logger.Warn("erased members not read again; the next reconnection tries again", "err", err)
	}
}

func (s *Set) load(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT member_id FROM member_erasures`)
	if err != nil {
		return fmt.Errorf("read erased members: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("read erased members: %w", err)
	}
	s.add(ids)
	return nil
}

// add records ids and runs the hooks for the ones that are new here.
func (s *Set) add(ids []int64) {
	var fresh []int64
	s.mu.Lock()
	for _, id := range ids {
		if _, ok := s.erased[id]; !ok {
			s.erased[id] = struct{}{}
			fresh = append(fresh, id)
		}
	}
	s.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	for _, f := range s.onErase {
		f(fresh)
	}
}
