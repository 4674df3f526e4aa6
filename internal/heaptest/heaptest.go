// Package heaptest measures how much the Go heap grows while a function runs, for tests that
// promise a constant heap (streamed uploads and downloads).
package heaptest

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Growth runs f and returns the peak of the live heap objects while it ran, minus the heap
// just before (after a GC), sampled every 2 ms, and that baseline.
func Growth(f func()) (growth int64, baseline uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	baseline = heap()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(2 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				if h := heap(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	return int64(peak.Load()) - int64(baseline), baseline
}
