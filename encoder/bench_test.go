package encoder_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
)

// BenchmarkEncode_Ladder1080p times the default ladder (every rung of a 1080p source, the
// default preset and segments, the thumbnail and whatever else an encode writes) on one 20 s
// 1080p source with audio, generated before the timer starts. docs/benchmarks/runs/2026-12-02-encode-player-grade-hls.md compares it
// across commits ("Encode time of the default ladder").
func BenchmarkEncode_Ladder1080p(b *testing.B) {
	dir := b.TempDir()
	input := testvideo.MP4(b, dir, testvideo.Spec{Seconds: 20, Width: 1920, Height: 1080, Audio: true})
	e, err := encoder.New(encoder.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		out := filepath.Join(dir, "out", string(rune('a'+i%26)))
		if _, err := e.Encode(context.Background(), input, out); err != nil {
			b.Fatal(err)
		}
	}
}
