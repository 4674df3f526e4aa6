// Package cache answers "may this member play this media?" from memory. It caches each media
// item's access fields (ristretto, cost-bounded, with a TTL for found and a shorter one for
// missing media), makes one query for concurrent misses on one id (singleflight), and evicts
// ids whose rows changed as soon as any node says so (LISTEN/NOTIFY), so staleness is bounded
// by milliseconds rather than by the TTL.
//
// While the database cannot be read, an entry past its TTL still answers (stale-if-error) for
// at most MaxStale, so requests for media known before an outage keep being served; an id
// with nothing known answers apperr.Unavailable.
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
	// MaxStale is how long past its TTL (or NegativeTTL) an entry may still answer while the
	// database cannot be read: the bound on the staleness an outage adds. Default 10 min.
	MaxStale time.Duration
	// LoadTimeout bounds one database lookup, so a database that does not answer cannot hold
	// a request (and its pool connection) for ever. Default 2 s.
	LoadTimeout time.Duration
	// Load reads from the database. Required.
	Load LoadFunc
	// Registerer receives the cache's metrics. Optional.
	Registerer prometheus.Registerer
}

type entry struct {
	access media.Access
	found  bool
	// freshUntil (Unix ns) ends the time the entry answers without asking the database;
	// ristretto's own TTL, at staleUntil, ends the time it may answer when the database
	// cannot. clears is the cache's clears when it was loaded: a Clear makes it stale.
	freshUntil, staleUntil int64
	clears                 uint64
}

// staleRetry is how long a stale entry answers without asking the database again after a
// lookup failed: during an outage, one request per id per staleRetry waits for the database
// (at most LoadTimeout), the others are answered from memory at once.
const staleRetry = time.Second

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
	// clears counts Clear calls: entries loaded before the last one are stale, not gone.
	clears atomic.Uint64

	hits, misses, loads, invalidations            prometheus.Counter
	evictions, staleServed, loadFailures, cleared prometheus.Counter
}

// New returns a Cache. It caches once started.
func New(cfg Config) (*Cache, error) {
	cfg.MaxItems = cmp.Or(cfg.MaxItems, 100_000)
	cfg.TTL = cmp.Or(cfg.TTL, 60*time.Second)
	cfg.NegativeTTL = cmp.Or(cfg.NegativeTTL, 5*time.Second)
	cfg.MaxStale = cmp.Or(cfg.MaxStale, 10*time.Minute)
	cfg.LoadTimeout = cmp.Or(cfg.LoadTimeout, 2*time.Second)
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
	c.invalidations = counter("invalidations_total", "Entries evicted because the media changed: a node notified it, or a request read a newer row.")
	c.evictions = counter("evictions_total", "Entries the cache dropped by itself: for space, or past their TTL and PLAYHEAD_CACHE_MAX_STALE.")
	c.staleServed = counter("stale_served_total", "Lookups answered from an entry past its TTL because the database could not be read (at most PLAYHEAD_CACHE_MAX_STALE past it).")
	c.loadFailures = counter("load_failures_total", "Database lookups that failed (unreachable, timed out); each answered stale when an entry was known, 503 otherwise.")
	c.cleared = counter("clears_total", "Times every entry was marked stale because the notification listener (re)connected and may have missed changes: one per (re)connection.")
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(c.hits, c.misses, c.loads, c.invalidations, c.evictions, c.staleServed, c.loadFailures, c.cleared)
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
// there is no such media. When the database cannot be read, an entry past its TTL answers for
// up to MaxStale more; with none, the error is apperr.Unavailable.
func (c *Cache) Access(ctx context.Context, id int64) (media.Access, bool, error) {
	rc := c.rc.Load()
	if rc == nil {
		access, found, err := c.load(ctx, id)
		return access, found, err
	}
	if e, ok := rc.Get(id); ok && c.fresh(e, time.Now()) {
		c.hits.Inc()
		return e.access, e.found, nil
	}
	c.misses.Inc()
	v, err, _ := c.group.Do(strconv.FormatInt(id, 10), func() (any, error) {
		// A caller that found the id missing may arrive just after another finished loading
		// it: look again before going to the database.
		stale, known := rc.Get(id)
		if known && c.fresh(stale, time.Now()) {
			return stale, nil
		}
		gen := c.generation.Load()
		clears := c.clears.Load()
		access, found, err := c.load(ctx, id)
		now := time.Now()
		if err != nil {
			if !known {
				return entry{}, err
			}
			c.staleServed.Inc()
			if c.generation.Load() == gen {
				// Ask the database again in staleRetry, not on every request meanwhile; the
				// entry still ends at its staleUntil.
				stale.freshUntil = now.Add(staleRetry).UnixNano()
				set(rc, id, stale, now)
			}
			return stale, nil
		}
		ttl := c.cfg.TTL
		if !found {
			ttl = c.cfg.NegativeTTL
		}
		e := entry{access: access, found: found, clears: clears,
			freshUntil: now.Add(ttl).UnixNano(), staleUntil: now.Add(ttl + c.cfg.MaxStale).UnixNano()}
		if c.generation.Load() != gen {
			return e, nil
		}
		set(rc, id, e, now)
		return e, nil
	})
	if err != nil {
		return media.Access{}, false, err
	}
	e := v.(entry)
	return e.access, e.found, nil
}

// load reads id from the database within LoadTimeout (a caller that gave up does not cancel
// a lookup others may share). Its error is apperr.Unavailable, wrapping the cause.
func (c *Cache) load(ctx context.Context, id int64) (media.Access, bool, error) {
	c.loads.Inc()
	loadCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LoadTimeout)
	defer cancel()
	access, found, err := c.cfg.Load(loadCtx, id)
	if err != nil {
		c.loadFailures.Inc()
		return media.Access{}, false, fmt.Errorf("%w: %w", apperr.Errorf(apperr.Unavailable,
			"media %d cannot be checked while the database is unavailable; retry later", id), err)
	}
	return access, found, nil
}

// fresh reports whether e may answer without asking the database.
func (c *Cache) fresh(e entry, now time.Time) bool {
	return now.UnixNano() < e.freshUntil && e.clears == c.clears.Load()
}

// set stores e in rc until its staleUntil.
func set(rc *ristretto.Cache[int64, entry], id int64, e entry, now time.Time) {
	ttl := time.Duration(e.staleUntil - now.UnixNano())
	if ttl <= 0 {
		return
	}
	rc.SetWithTTL(id, e, 1, ttl)
	// Sets are applied asynchronously; wait so the next lookup sees this one and a flood of
	// requests for one id cannot outrun it into the database.
	rc.Wait()
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

// Clear makes every entry stale: notifications may have been missed while the listener was
// down, so each is read again from the database before it is trusted, but stays the answer of
// last resort (up to MaxStale) if the database cannot be read.
func (c *Cache) Clear() {
	c.generation.Add(1)
	c.clears.Add(1)
	c.cleared.Inc()
}
