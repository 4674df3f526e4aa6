package export_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/playhead/playhead/export"
)

// bits is a 100-bucket bitmap with the buckets set.
func bits(set ...int) pgtype.Bits {
	b := pgtype.Bits{Bytes: make([]byte, 13), Len: 100, Valid: true}
	for _, i := range set {
		b.Bytes[i/8] |= 0x80 >> (i % 8)
	}
	return b
}

func TestRanges(t *testing.T) {
	every := make([]int, 100)
	for i := range every {
		every[i] = i
	}
	for name, c := range map[string]struct {
		watched  pgtype.Bits
		duration int64
		want     []export.Range
	}{
		"Never written":    {pgtype.Bits{}, 60_000, []export.Range{}},
		"Unknown duration": {bits(1, 2), 0, []export.Range{}},
		"None":             {bits(), 60_000, []export.Range{}},
		"All":              {bits(every...), 60_000, []export.Range{{0, 60_000}}},
		"First and last":   {bits(0, 99), 100_000, []export.Range{{0, 1000}, {99_000, 100_000}}},
		"Runs":             {bits(3, 4, 5, 50, 52), 200_000, []export.Range{{6000, 12_000}, {100_000, 102_000}, {104_000, 106_000}}},
		// 7 s in 100 buckets: each bucket ends where the next starts, the last at the end.
		"Uneven duration": {bits(0, 98, 99), 7_001, []export.Range{{0, 70}, {6860, 7001}}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := export.Ranges(c.watched, c.duration); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}
