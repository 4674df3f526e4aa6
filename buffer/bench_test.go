package buffer_test

import (
	"cmp"
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/buffer"
)

// The benchmarks use the shapes of playback's key and value (member and media ids; a position
// and its event time) without importing playback.

type benchKey struct{ member, media int64 }

type benchVal struct {
	pos int32
	at  time.Time
}

func compareBenchKeys(a, b benchKey) int {
	return cmp.Or(cmp.Compare(a.member, b.member), cmp.Compare(a.media, b.media))
}

func newerBenchVal(a, b benchVal) bool { return a.at.After(b.at) }

// benchKeySpace is how many distinct keys the producers write: 100 000 viewers.
const benchKeySpace = 100_000

func benchKeyOf(i int) benchKey {
	i %= benchKeySpace
	return benchKey{member: int64(i / 10), media: int64(i % 10)}
}

var benchBase = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// nextProducer hands each RunParallel goroutine its own stretch of keys.
var nextProducer atomic.Int64

// BenchmarkOffer measures Buffer.Offer from concurrent producers, with the flusher running and
// a flush that does nothing. The channel holds b.N entries, so no Offer can find it full even
// when the flusher falls behind (on 2 cores it does: it shares them with the producers); the
// drops metric shows it stayed 0 (a dropped Offer is cheaper and would flatter the figure).
func BenchmarkOffer(b *testing.B) {
	b.Run("impl=Buffer", func(b *testing.B) {
		buf, err := buffer.New(buffer.Config[benchKey, benchVal]{
			Capacity:      max(b.N, 1024),
			FlushInterval: time.Hour,
			Flush:         func(context.Context, []buffer.Entry[benchKey, benchVal]) error { return nil },
			Compare:       compareBenchKeys,
			Newer:         newerBenchVal,
			Metrics:       buffer.NewMetrics(prometheus.NewRegistry(), "bench"),
		})
		if err != nil {
			b.Fatal(err)
		}
		buf.Start()
		var drops atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(nextProducer.Add(1)) * 7919
			var dropped int64
			for pb.Next() {
				i++
				ok, err := buf.Offer(benchKeyOf(i), benchVal{pos: int32(i), at: benchBase.Add(time.Duration(i))})
				if err != nil {
					b.Error(err)
					return
				}
				if !ok {
					dropped++
				}
			}
			drops.Add(dropped)
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "offers/s")
		b.ReportMetric(float64(drops.Load()), "drops")
		if err := buf.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	})

	// The baseline: what one writes without a channel, a map behind one mutex that every
	// producer writes into. It does no flush work at all, which favours it.
	b.Run("impl=MutexMap", func(b *testing.B) {
		var mu sync.Mutex
		held := make(map[benchKey]benchVal)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(nextProducer.Add(1)) * 7919
			for pb.Next() {
				i++
				k, v := benchKeyOf(i), benchVal{pos: int32(i), at: benchBase.Add(time.Duration(i))}
				mu.Lock()
				if old, ok := held[k]; !ok || newerBenchVal(v, old) {
					held[k] = v
				}
				mu.Unlock()
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "offers/s")
		b.ReportMetric(0, "drops")
	})
}

// coalesceEntries is the flusher's input for one batch: n entries over 70% as many keys
// (about 30% of the entries repeat a key), with event times in random order so the newer check
// matters.
func coalesceEntries(n int) []buffer.Entry[benchKey, benchVal] {
	rng := rand.New(rand.NewPCG(1, 2))
	distinct := n * 7 / 10
	keys := make([]benchKey, distinct)
	for i := range keys {
		keys[i] = benchKey{member: rng.Int64N(1_000_000), media: rng.Int64N(10_000)}
	}
	entries := make([]buffer.Entry[benchKey, benchVal], n)
	for i := range entries {
		k := keys[i%distinct] // every key once, then repeats
		if i >= distinct {
			k = keys[rng.IntN(distinct)]
		}
		entries[i] = buffer.Entry[benchKey, benchVal]{Key: k, Value: benchVal{pos: int32(i), at: benchBase.Add(time.Duration(i) * time.Millisecond)}}
	}
	rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	return entries
}

// coalesceSort is what the flusher does with a batch: hold each entry in a map with the newer
// check (the map is kept and cleared between batches, as the flusher does), then Sorted.
func coalesceSort(held map[benchKey]benchVal, entries []buffer.Entry[benchKey, benchVal]) []buffer.Entry[benchKey, benchVal] {
	for _, e := range entries {
		if old, ok := held[e.Key]; ok && !newerBenchVal(e.Value, old) {
			continue
		}
		held[e.Key] = e.Value
	}
	batch := buffer.Sorted(held, compareBenchKeys)
	clear(held)
	return batch
}

// naiveSortDedupe is the baseline: keep every entry, sort by key and newest first, then keep
// the first entry of each key.
func naiveSortDedupe(all []buffer.Entry[benchKey, benchVal], entries []buffer.Entry[benchKey, benchVal]) []buffer.Entry[benchKey, benchVal] {
	all = append(all[:0], entries...)
	sort.Slice(all, func(i, j int) bool {
		if c := compareBenchKeys(all[i].Key, all[j].Key); c != 0 {
			return c < 0
		}
		return newerBenchVal(all[i].Value, all[j].Value)
	})
	out := all[:0]
	for i, e := range all {
		if i > 0 && e.Key == all[i-1].Key {
			continue
		}
		out = append(out, e)
	}
	return out
}

// BenchmarkCoalesceSort measures turning 10 000 buffered entries (about 30% duplicate keys)
// into one coalesced, sorted batch.
func BenchmarkCoalesceSort(b *testing.B) {
	const n = 10_000
	entries := coalesceEntries(n)

	// Both ways must produce the same batch; checked once, outside the timings.
	want := coalesceSort(make(map[benchKey]benchVal), entries)
	got := naiveSortDedupe(nil, entries)
	if len(got) != len(want) {
		b.Fatalf("naive dedupe kept %d entries, coalesce %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || !got[i].Value.at.Equal(want[i].Value.at) {
			b.Fatalf("entry %d: naive %+v, coalesce %+v", i, got[i], want[i])
		}
	}
	b.Logf("%d entries, %d distinct keys (%.0f%% duplicates)", n, len(want), 100*float64(n-len(want))/n)

	b.Run("impl=MapSorted", func(b *testing.B) {
		held := make(map[benchKey]benchVal, 1_000)
		b.ReportAllocs()
		for b.Loop() {
			coalesceSort(held, entries)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
	})
	b.Run("impl=NaiveSortDedupe", func(b *testing.B) {
		all := make([]buffer.Entry[benchKey, benchVal], 0, n)
		b.ReportAllocs()
		for b.Loop() {
			naiveSortDedupe(all, entries)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
	})
}
