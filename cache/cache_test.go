package cache_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// countingLoader wraps the real database lookup and counts the queries it makes.
type countingLoader struct {
	store *media.Store
	n     atomic.Int64
}

func (l *countingLoader) load(ctx context.Context, id int64) (media.Access, bool, error) {
	l.n.Add(1)
	return l.store.LookupAccess(ctx, id)
}

func newCache(t *testing.T, cfg cache.Config) *cache.Cache {
	t.Helper()
	c, err := cache.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// A flood of concurrent requests for one unknown id makes one query per negative-TTL window.
func TestCache_UnknownIDFloodMakesOneQueryPerWindow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	loader := &countingLoader{store: media.NewStore(pool)}
	const negativeTTL = 300 * time.Millisecond
	c := newCache(t, cache.Config{NegativeTTL: negativeTTL, Load: loader.load})

	flood := func() {
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 50 {
					_, err := c.Playable(context.Background(), 1, 424242)
					if apperr.CodeOf(err) != apperr.NotFound {
						t.Errorf("Playable(unknown) = %v, want not found", err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	start := time.Now()
	flood()
	elapsed := time.Since(start)
	if got := loader.n.Load(); elapsed < negativeTTL && got != 1 {
		t.Fatalf("3 200 lookups within one window made %d queries, want 1", got)
	} else if got > int64(elapsed/negativeTTL)+1 {
		t.Fatalf("%d queries in %v, want at most one per %v window", got, elapsed, negativeTTL)
	}
	before := loader.n.Load()
	time.Sleep(negativeTTL + 100*time.Millisecond) // the negative entry expires
	flood()
	if got := loader.n.Load() - before; got < 1 || got > 2 {
		t.Fatalf("the next window made %d queries, want 1 (2 if the flood crossed a window)", got)
	}
}

// A media change made through one node evicts the entry on another node: with an hour's TTL
// only the notification can. (How soon is logged, not asserted: the deadline below is only
// for failure.)
func TestCache_ChangeOnOneNodeEvictsOnAnother(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.Pool(t)
	store := media.NewStore(pool)
	m, err := store.Create(context.Background(), media.Media{OwnerID: 1, Title: "film", Status: media.StatusReady, Visibility: media.VisibilityPublic})
	if err != nil {
		t.Fatal(err)
	}
	// Node B: its own cache and listener. A long TTL, so only the notification can evict.
	nodeB := newCache(t, cache.Config{TTL: time.Hour, Load: store.LookupAccess})
	connected := make(chan struct{}, 1)
	listener := notify.NewListener(dbURL, slog.Default())
	listener.Handle(media.ChannelChanged, nodeB.EvictPayload, func() {
		nodeB.Clear()
		connected <- struct{}{}
	})
	if err := listener.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Stop(context.Background()) })
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not connect")
	}

	if _, err := nodeB.Playable(context.Background(), 2, m.ID); err != nil {
		t.Fatalf("node B before the change: %v", err)
	}
	// Node A (this store) makes the media private.
	private := media.VisibilityPrivate
	changedAt := time.Now()
	if _, err := store.Update(context.Background(), m.ID, media.Patch{Visibility: &private}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := nodeB.Playable(context.Background(), 2, m.ID)
		if apperr.CodeOf(err) == apperr.NotFound {
			t.Logf("node B saw the change after %v", time.Since(changedAt))
			return
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if time.Since(changedAt) > time.Minute {
			t.Fatal("node B still serves the old entry a minute after the change (its TTL is an hour)")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCache_PlayableRules(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	c := newCache(t, cache.Config{Load: store.LookupAccess})
	create := func(status media.Status, vis media.Visibility, owner int64) int64 {
		m, err := store.Create(context.Background(), media.Media{OwnerID: owner, Title: "m", Status: status, Visibility: vis})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	cases := []struct {
		name     string
		id       int64
		member   int64
		playable bool
	}{
		{"PublicReady", create(media.StatusReady, media.VisibilityPublic, 1), 2, true},
		{"PrivateReadyOwner", create(media.StatusReady, media.VisibilityPrivate, 3), 3, true},
		{"PrivateReadyOther", create(media.StatusReady, media.VisibilityPrivate, 3), 4, false},
		{"PublicProcessing", create(media.StatusProcessing, media.VisibilityPublic, 1), 2, false},
		{"PublicFailed", create(media.StatusFailed, media.VisibilityPublic, 1), 1, false},
	}
	for _, tc := range cases {
		for _, direct := range []bool{false, true} {
			var err error
			if direct {
				_, err = cache.Direct(store.LookupAccess).Playable(context.Background(), tc.member, tc.id)
			} else {
				_, err = c.Playable(context.Background(), tc.member, tc.id)
			}
			if (err == nil) != tc.playable {
				t.Errorf("%s (direct %v): err = %v, want playable %v", tc.name, direct, err, tc.playable)
			}
		}
	}
}

// outageLoader is the real lookup behind a switch: while down it fails as an unreachable
// database does, while hung it waits for its context as an unanswering one does.
type outageLoader struct {
	store      *media.Store
	down, hung atomic.Bool
	calls      atomic.Int64
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (l *outageLoader) load(ctx context.Context, id int64) (media.Access, bool, error) {
	l.calls.Add(1)
	switch {
	case l.hung.Load():
		<-ctx.Done()
		return media.Access{}, false, ctx.Err()
	case l.down.Load():
		return media.Access{}, false, errUnreachable
	}
	return l.store.LookupAccess(ctx, id)
}

func createPublic(t *testing.T, store *media.Store) int64 {
	t.Helper()
	m, err := store.Create(context.Background(), media.Media{OwnerID: 1, Title: "m", Status: media.StatusReady, Visibility: media.VisibilityPublic})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// While the database cannot be read, a media known before the outage stays playable past its
// TTL (stale-if-error), also after a Clear (the listener reconnecting); an id with nothing
// known, or evicted by a change notification, answers Unavailable (503), never Internal (500).
func TestCache_StaleIfErrorDuringOutage(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	known, unknown, evicted := createPublic(t, store), createPublic(t, store), createPublic(t, store)
	loader := &outageLoader{store: store}
	c := newCache(t, cache.Config{TTL: 20 * time.Millisecond, MaxStale: time.Hour, Load: loader.load})
	for _, id := range []int64{known, evicted} {
		if _, err := c.Playable(context.Background(), 2, id); err != nil {
			t.Fatal(err)
		}
	}

	loader.down.Store(true)
	// Wait for the thing itself: the TTL has passed once the cache asks the loader again.
	callsBefore := loader.calls.Load()
	giveUp := time.Now().Add(20 * time.Second)
	for loader.calls.Load() == callsBefore {
		if _, err := c.Playable(context.Background(), 2, known); err != nil {
			t.Fatalf("Playable(known media) during the outage = %v, want the last known answer", err)
		}
		if time.Now().After(giveUp) {
			t.Fatal("the entry never expired")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Playable(context.Background(), 2, known); err != nil {
		t.Fatalf("Playable(known media) past its TTL during the outage = %v, want the stale answer", err)
	}
	c.Clear()
	if _, err := c.Playable(context.Background(), 2, known); err != nil {
		t.Fatalf("Playable(known media) after Clear during the outage = %v, want the stale answer", err)
	}
	c.Evict(evicted)
	for name, id := range map[string]int64{"never looked up": unknown, "evicted": evicted} {
		_, err := c.Playable(context.Background(), 2, id)
		if code := apperr.CodeOf(err); code != apperr.Unavailable || !errors.Is(err, errUnreachable) {
			t.Errorf("Playable(%s media) during the outage = %v (code %s), want unavailable wrapping the cause", name, err, code)
		}
	}

	loader.down.Store(false)
	private := media.VisibilityPrivate
	if _, err := store.Update(context.Background(), known, media.Patch{Visibility: &private}); err != nil {
		t.Fatal(err)
	}
	// Back: the next lookups read the database again (no notification here: the TTL and the
	// stale entry's retry interval are what send them there).
	giveUp = time.Now().Add(20 * time.Second)
	for {
		_, err := c.Playable(context.Background(), 2, known)
		if apperr.CodeOf(err) == apperr.NotFound {
			break
		}
		if err != nil || time.Now().After(giveUp) {
			t.Fatalf("after the outage the stale entry is still served (err %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A stale entry answers for at most MaxStale past its TTL: then the lookup fails with
// Unavailable, however long the outage lasts.
func TestCache_StaleBoundedByMaxStale(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	id := createPublic(t, store)
	loader := &outageLoader{store: store}
	c := newCache(t, cache.Config{TTL: 10 * time.Millisecond, MaxStale: 100 * time.Millisecond, Load: loader.load})
	if _, err := c.Playable(context.Background(), 2, id); err != nil {
		t.Fatal(err)
	}
	loader.down.Store(true)
	giveUp := time.Now().Add(20 * time.Second)
	for {
		_, err := c.Playable(context.Background(), 2, id)
		if apperr.CodeOf(err) == apperr.Unavailable {
			return
		}
		if err != nil {
			t.Fatalf("Playable during the outage = %v, want the stale answer or unavailable", err)
		}
		if time.Now().After(giveUp) {
			t.Fatal("a stale entry is still served 20 s into the outage with MaxStale 100 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A database that does not answer cannot hold a lookup for ever: it ends after LoadTimeout
// with Unavailable (before, the lookup ignored every deadline, and a hung request kept its
// pool connection past the shutdown budget).
func TestCache_HungLookupEndsAfterLoadTimeout(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	loader := &outageLoader{store: media.NewStore(pool)}
	loader.hung.Store(true)
	c := newCache(t, cache.Config{LoadTimeout: 50 * time.Millisecond, Load: loader.load})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a request whose client has gone: the lookup still runs, bounded by LoadTimeout
	done := make(chan error, 1)
	go func() { _, err := c.Playable(ctx, 2, 1); done <- err }()
	select {
	case err := <-done:
		if apperr.CodeOf(err) != apperr.Unavailable || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Playable on a hung database = %v, want unavailable after the load timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Playable on a hung database has not returned after 20 s (load timeout 50 ms)")
	}
}
