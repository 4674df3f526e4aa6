package playback_test

import (
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/playback"
)

// FuzzParsePosition: any body gets a position ≥ 0 or a client error, never a panic or a 500.
func FuzzParsePosition(f *testing.F) {
	for _, seed := range []string{`{"position_ms": 61000}`, `{"position_ms": -1}`, `{"position_ms": 1.5}`, `{}`, `null`, ``,
		`{"position_ms": 1}}`, `{"position_ms": "7"}`, `{"position_ms": 1e400}`, `[{"position_ms": 1}]`, "{\"position_ms\":\x00}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pos, err := playback.ParsePosition(body)
		if err == nil {
			if pos < 0 {
				t.Fatalf("accepted a negative position %d from %q", pos, body)
			}
			return
		}
		switch apperr.CodeOf(err) {
		case apperr.Invalid, apperr.Unprocessable, apperr.TooLarge:
		default:
			t.Fatalf("%q gave %v, want a client error", body, err)
		}
	})
}
