package buffer

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// pendingShards spreads the pending index over this many locks so concurrent Offers on
// different keys rarely contend.
const pendingShards = 64

// pendingIndex maps each key to its newest value not yet written. It is the buffer's store of
// values: Offer writes into it (a newer value for a key already here replaces the older one in
// place), the flusher reads the values of the keys it flushes from it, and reads on this node
// see their own writes in it. A key is here exactly while it is waiting in the channel or held
// by the flusher (in flight included), so count bounds everything the buffer holds.
type pendingIndex[K comparable, V any] struct {
	seed   maphash.Seed
	count  atomic.Int64 // keys in all shards: written under a shard lock, read by Offer's ceiling check
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

// offerResult is what happened to one offered entry.
type offerResult int

const (
	offerAdded     offerResult = iota // a new key: stored, and announced to the flusher
	offerCoalesced                    // the key was already pending: the newer value kept in place
	offerFull                         // a new key, but the ceiling was reached or the channel full
)

// offer stores value for key. A key already pending keeps the newer of its two values and
// needs nothing else: the flusher holds it or will receive it. A new key is stored only if the
// index is below maxKeys and the key fits into announce, the flusher's channel; the send happens
// under the shard lock, so no other Offer can see the key before the flusher is told about it,
// and the flusher cannot forget it before it is stored.
func (p *pendingIndex[K, V]) offer(key K, value V, newer func(a, b V) bool, maxKeys int64, announce chan<- K) offerResult {
	s := p.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[key]; ok {
		if newer(value, old) {
			s.m[key] = value
		}
		return offerCoalesced
	}
	if p.count.Load() >= maxKeys {
		return offerFull
	}
	select {
	case announce <- key:
	default:
		return offerFull
	}
	s.m[key] = value
	p.count.Add(1)
	return offerAdded
}

// settle removes key after written was stored (or given up on), unless a newer value was
// offered meanwhile: then the key stays pending and settle returns true. The check and the
// removal are one step under the shard lock, so an Offer either updates the key before (and
// settle keeps it) or finds it gone and announces it anew.
func (p *pendingIndex[K, V]) settle(key K, written V, newer func(a, b V) bool) (stillPending bool) {
	s := p.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[key]
	if !ok {
		return false
	}
	if newer(cur, written) {
		return true
	}
	delete(s.m, key)
	p.count.Add(-1)
	return false
}

// remove forgets key whatever its value: used once intake has stopped, for what was spilled
// or lost at the stop.
func (p *pendingIndex[K, V]) remove(key K) {
	s := p.shard(key)
	s.mu.Lock()
	if _, ok := s.m[key]; ok {
		delete(s.m, key)
		p.count.Add(-1)
	}
	s.mu.Unlock()
}

// drop forgets every key match selects whatever its value, and returns how many. The flusher
// learns of it when it finds the key no longer pending (flushHeld), and a flush in flight
// settles nothing for it (settle finds it gone).
func (p *pendingIndex[K, V]) drop(match func(K) bool) int {
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for k := range s.m {
			if match(k) {
				delete(s.m, k)
				n++
			}
		}
		s.mu.Unlock()
	}
	p.count.Add(-int64(n))
	return n
}

func (p *pendingIndex[K, V]) load(key K) (V, bool) {
	s := p.shard(key)
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	return v, ok
}
