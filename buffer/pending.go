package buffer

import (
	"hash/maphash"
	"sync"
)

// pendingShards spreads the pending index over this many locks so concurrent Offers on
// different keys rarely contend.
const pendingShards = 64

// pendingIndex maps each key to its newest unflushed value. Its size is bounded by the
// channel capacity plus one batch, because the flusher forgets every key it flushes.
type pendingIndex[K comparable, V any] struct {
	seed   maphash.Seed
	shards [pendingShards]pendingShard[K, V]
}

type pendingShard[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
	_  [40]byte // keeps neighbouring shards' locks off one cache line
}

func (p *pendingIndex[K, V]) init() {
	p.seed = maphash.MakeSeed()
	for i := range p.shards {
		p.shards[i].m = make(map[K]V)
	}
}

func (p *pendingIndex[K, V]) shard(key K) *pendingShard[K, V] {
	return &p.shards[maphash.Comparable(p.seed, key)%pendingShards]
}

func (p *pendingIndex[K, V]) store(key K, value V, newer func(a, b V) bool) {
	s := p.shard(key)
	s.mu.Lock()
	if old, ok := s.m[key]; !ok || newer(value, old) {
		s.m[key] = value
	}
	s.mu.Unlock()
}

// forget removes key unless a value newer than flushed was offered since.
func (p *pendingIndex[K, V]) forget(key K, flushed V, newer func(a, b V) bool) {
	s := p.shard(key)
	s.mu.Lock()
	if cur, ok := s.m[key]; ok && !newer(cur, flushed) {
		delete(s.m, key)
	}
	s.mu.Unlock()
}

func (p *pendingIndex[K, V]) load(key K) (V, bool) {
	s := p.shard(key)
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	return v, ok
}
