package export

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// buckets is how many parts of a video playback.watched has (audience.Buckets): bit i, counted
// from the left, is the part from i % to (i+1) % of the duration.
const buckets = 100

// Range is a part of a video the member played, in milliseconds from its start.
type Range struct {
	StartMS int64 `json:"start_ms"`
	EndMS   int64 `json:"end_ms"`
}

// Ranges turns a row's watched bitmap into the parts of a video of durationMS it marks, each
// run of consecutive buckets one range, in order. A bitmap that was never written (NULL) or a
// duration that is not known gives none: the buckets mean nothing without it.
func Ranges(watched pgtype.Bits, durationMS int64) []Range {
	out := []Range{}
	if !watched.Valid || durationMS <= 0 {
		return out
	}
	set := func(i int) bool {
		return i < int(watched.Len) && watched.Bytes[i/8]&(0x80>>(i%8)) != 0
	}
	for i := 0; i < buckets; i++ {
		if !set(i) {
			continue
		}
		j := i
		for j+1 < buckets && set(j+1) {
			j++
		}
		out = append(out, Range{StartMS: int64(i) * durationMS / buckets, EndMS: int64(j+1) * durationMS / buckets})
		i = j
	}
	return out
}

// clock writes ms as HH:MM:SS (hours past 99 as they come), the way a viewing activity
// download shows times.
func clock(ms int64) string {
	s := ms / 1000
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// rangesText writes ranges as "00:00:00-00:12:30; 00:20:00-00:21:00".
func rangesText(ranges []Range) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = clock(r.StartMS) + "-" + clock(r.EndMS)
	}
	return strings.Join(parts, "; ")
}
