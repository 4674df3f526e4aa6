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

// A media change made through one node evicts the entry on another node within a second.
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
		if time.Since(changedAt) > time.Second {
			t.Fatal("node B still serves the old entry one second after the change")
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
