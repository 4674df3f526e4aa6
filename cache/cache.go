// Package cache answers "may this member play this media?" from memory. It caches each media
// item's access fields (ristretto, cost-bounded, with a TTL for found and a shorter one for
// missing media), makes one query for concurrent misses on one id (singleflight), and evicts
// ids whose rows changed as soon as any node says so (LISTEN/NOTIFY), so staleness is bounded
// by milliseconds rather than by the TTL.
package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// LoadFunc reads one media item's access fields from the database; found is false when there
// is no such media.
type LoadFunc func(ctx context.Context, id int64) (access media.Access, found bool, err error)

// Config configures a Cache. Zero values take the defaults named on each field.
type Config struct {
	// MaxItems bounds the cached media ids. Default 100 000.
	MaxItems int64
	// TTL is how long a found media item is trusted without a notification. Default 60 s.
	TTL time.Duration
	// NegativeTTL is how long a missing id is remembered, so a flood of bogus ids makes one
	// query per id per window. Default 5 s.
	NegativeTTL time.Duration
	// Load reads from the database. Required.
	Load LoadFunc
	// Registerer receives the cache's metrics. Optional.
	Registerer prometheus.Registerer
}

type entry struct {
	access media.Access
	found  bool
}

// Cache is the media access cache. It is safe for concurrent use. It caches only between
// Start and Stop; before and after, every lookup reads the database (ristretto's goroutines
// live exactly as long as the service).
type Cache struct {
	cfg Config
	// rc is set by Start and cleared by Stop, read by every lookup; nil means "not caching".
	rc    atomic.Pointer[ristretto.Cache[int64, entry]]
	mu    sync.Mutex // serialises Start and Stop
	done  bool       // set by Stop: a stopped cache does not start again
	group singleflight.Group
	// generation counts evictions. A load that saw it change while querying does not cache
	// its result: the row may have changed after the query read it.
	generation atomic.Uint64

	hits, misses, loads, invalidations prometheus.Counter
	evictions                          prometheus.Counter
}

// New returns a Cache. It caches once started.
func New(cfg Config) (*Cache, error) {
	cfg.MaxItems = cmp.Or(cfg.MaxItems, 100_000)
	cfg.TTL = cmp.Or(cfg.TTL, 60*time.Second)
	cfg.NegativeTTL = cmp.Or(cfg.NegativeTTL, 5*time.Second)
	if cfg.Load == nil {
		return nil, errors.New("cache: Load is required")
	}
	c := &Cache{cfg: cfg}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "media_cache", Name: name, Help: help})
	}
	c.hits = counter("hits_total", "Lookups answered from the cache.")
	c.misses = counter("misses_total", "Lookups not in the cache.")
	c.loads = counter("loads_total", "Database queries made to fill the cache (concurrent misses share one).")
	c.invalidations = counter("invalidations_total", "Entries evicted because a node notified that the media changed.")
	c.evictions = counter("evictions_total", "Entries the cache dropped by itself: for space, on TTL expiry, or cleared after the notification listener reconnected.")
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(c.hits, c.misses, c.loads, c.invalidations, c.evictions)
	}

	return c, nil
}

// Start creates the in-memory cache (and ristretto's goroutines).
func (c *Cache) Start(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done || c.rc.Load() != nil {
		return nil
	}
	rc, err := ristretto.NewCache(&ristretto.Config[int64, entry]{
		// Ristretto wants about ten counters per item for its admission filter.
		NumCounters: c.cfg.MaxItems * 10,
		MaxCost:     c.cfg.MaxItems,
		BufferItems: 64,
		// Every item costs 1: without this, ~56 bytes of internal cost per item would make a
		// cache sized in items hold far fewer than MaxItems.
		IgnoreInternalCost: true,
		OnEvict:            func(*ristretto.Item[entry]) { c.evictions.Inc() },
	})
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	c.rc.Store(rc)
	return nil
}

// Stop drops the in-memory cache and ends ristretto's goroutines; later lookups read the
// database. Idempotent; safe when never started.
func (c *Cache) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	// A load in flight may still hold the old cache: ristretto ignores sets after Close.
	if rc := c.rc.Swap(nil); rc != nil {
		rc.Close()
	}
	return nil
}

// Access returns media id's access fields, from memory when possible. found is false when
// there is no such media.
func (c *Cache) Access(ctx context.Context, id int64) (media.Access, bool, error) {
	rc := c.rc.Load()
	if rc == nil {
		return c.cfg.Load(ctx, id)
	}
	if e, ok := rc.Get(id); ok {
		c.hits.Inc()
		return e.access, e.found, nil
	}
	c.misses.Inc()
	v, err, _ := c.group.Do(strconv.FormatInt(id, 10), func() (any, error) {
		// A caller that found the id missing may arrive just after another finished loading
		// it: look again before going to the database.
		if e, ok := rc.Get(id); ok {
			return e, nil
		}
		c.loads.Inc()
		gen := c.generation.Load()
		access, found, err := c.cfg.Load(context.WithoutCancel(ctx), id)
		if err != nil {
			return entry{}, err
		}
		e := entry{access: access, found: found}
		ttl := c.cfg.TTL
		if !found {
			ttl = c.cfg.NegativeTTL
		}
		if c.generation.Load() != gen {
			return e, nil
		}
		rc.SetWithTTL(id, e, 1, ttl)
		// Sets are applied asynchronously; wait so the next lookup sees this one and a flood
		// of requests for one id cannot outrun it into the database.
		rc.Wait()
		return e, nil
	})
	if err != nil {
		return media.Access{}, false, err
	}
	e := v.(entry)
	return e.access, e.found, nil
}

// Playable returns media id's access fields when member may play it, and an apperr.NotFound
// error otherwise (a private media of someone else is indistinguishable from a missing one).
func (c *Cache) Playable(ctx context.Context, member, id int64) (media.Access, error) {
	access, found, err := c.Access(ctx, id)
	return playable(access, found, err, member, id)
}

// Direct answers Playable with a database query every time: the synchronous baseline's
// validation, kept to be measured against the cache.
type Direct LoadFunc

// Playable is Cache.Playable without the cache.
func (d Direct) Playable(ctx context.Context, member, id int64) (media.Access, error) {
	access, found, err := d(ctx, id)
	return playable(access, found, err, member, id)
}

func playable(access media.Access, found bool, err error, member, id int64) (media.Access, error) {
	if err != nil {
		return media.Access{}, err
	}
	if !found || !access.PlayableBy(member) {
		return media.Access{}, apperr.Errorf(apperr.NotFound, "media %d not found or not playable", id)
	}
	return access, nil
}

// Evict forgets id: the next lookup reads the database.
func (c *Cache) Evict(id int64) {
	c.generation.Add(1)
	if rc := c.rc.Load(); rc != nil {
		rc.Del(id)
	}
	c.invalidations.Inc()
}

// EvictPayload evicts the media id carried by a media_changed notification.
func (c *Cache) EvictPayload(payload string) {
	if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
		c.Evict(id)
	}
}

// Clear forgets everything: notifications may have been missed while the listener was down.
func (c *Cache) Clear() {
	c.generation.Add(1)
	if rc := c.rc.Load(); rc != nil {
		rc.Clear()
	}
}
