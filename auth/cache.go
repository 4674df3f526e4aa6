package auth

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

const cacheShards = 64

// tokenCache remembers verified tokens: a map per shard, bounded, holding each entry until its
// expiry. It replaced a ristretto cache, which under a steady 20 000 requests/s dropped most
// of its sets (it does that by design under contention), so nearly every request paid for a
// full JWT verification again.
type tokenCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]tokenShard
}

type tokenShard struct {
	mu sync.Mutex
	m  map[string]verified
	_  [40]byte // keep neighbouring shards' locks off one cache line
}

func newTokenCache(maxItems int) *tokenCache {
	c := &tokenCache{seed: maphash.MakeSeed(), perShard: max(1, maxItems/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]verified)
	}
	return c
}

func (c *tokenCache) shard(token string) *tokenShard {
	return &c.shards[maphash.String(c.seed, token)%cacheShards]
}

// get returns the entry of a verified token that has not expired at now.
func (c *tokenCache) get(token string, now time.Time) (verified, bool) {
	s := c.shard(token)
	s.mu.Lock()
	v, ok := s.m[token]
	s.mu.Unlock()
	if !ok || !now.Before(v.expires) {
		return verified{}, false
	}
	return v, true
}

// put remembers a verified token. A full shard first drops its expired entries and, if that
// is not enough, an eighth of the rest (map order: effectively at random).
func (c *tokenCache) put(token string, v verified, now time.Time) {
	s := c.shard(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= c.perShard {
		for k, old := range s.m {
			if !now.Before(old.expires) {
				delete(s.m, k)
			}
		}
		for k := range s.m {
			if len(s.m) < c.perShard-c.perShard/8 {
				break
			}
			delete(s.m, k)
		}
	}
	// A copy: the caller's token may point into a request buffer that Fiber reuses, and a map
	// key that changes under the map corrupts it.
	s.m[strings.Clone(token)] = v
}
