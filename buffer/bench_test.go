package buffer_test

import (
	"cmp"
	"context"
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
// a flush that does nothing. The channel (new keys only) holds b.N keys and MaxKeys exceeds the
// key space, so no Offer can find the buffer full even when the flusher falls behind (on 2
// cores it does: it shares them with the producers); the drops metric shows it stayed 0 (a
// dropped Offer is cheaper and would flatter the figure).
func BenchmarkOffer(b *testing.B) {
	b.Run("impl=Buffer", func(b *testing.B) {
		buf, err := buffer.New(buffer.Config[benchKey, benchVal]{
			Capacity:      max(b.N, 1024),
			MaxKeys:       max(b.N, 2*benchKeySpace),
			FlushInterval: time.Hour,
			Flush:         func(context.Context, []buffer.Entry[benchKey, benchVal]) error { return nil },
			Compare:       compareBenchKeys,
			Newer:         newerBenchVal,
			Metrics:       buffer.NewMetrics(prometheus.NewRegistry(), "bench"),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := buf.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
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
		if err := buf.Stop(context.Background()); err != nil {
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
