// Package stats holds the small helpers the benchmarks of this module share to summarise their
// rounds: the median of a few runs and a CPU time of internal/proccpu in seconds.
package stats

import (
	"slices"
	"time"
)

// Median returns the median of xs (the mean of the middle two for an even count); xs is not
// changed. It panics on an empty xs.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// CPUSeconds is a CPU time of internal/proccpu (Process, Tree) in seconds, 0 when the process
// was gone (ok false).
func CPUSeconds(d time.Duration, ok bool) float64 {
	if !ok {
		return 0
	}
	return d.Seconds()
}
