package playback_test

import (
	"fmt"
	"testing"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/quality"
)

// FuzzParsePosition: any body gets a position ≥ 0 or a client error, never a panic or a 500.
func FuzzParsePosition(f *testing.F) {
	f.Add([]byte(`{"position_ms": 1, "quality": {"startup_ms": 900, "played_ms": 5000, "rendition_height": 720, "error": "decode"}}`))
	f.Add([]byte(`{"position_ms": 1, "quality": {"rebuffer_ms": -1}}`))
	for _, seed := range []string{`{"position_ms": 61000}`, `{"position_ms": -1}`, `{"position_ms": 1.5}`, `{}`, `null`, ``,
		`{"position_ms": 1}}`, `{"position_ms": "7"}`, `{"position_ms": 1e400}`, `[{"position_ms": 1}]`, "{\"position_ms\":\x00}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pos, _, err := playback.ParseReport(body)
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

// FuzzParsePositionPlainAgrees checks that ParseReport, which reads the common body without
// encoding/json, answers every body exactly as encoding/json alone does: the same position, or
// the same error.
func FuzzParsePositionPlainAgrees(f *testing.F) {
	for _, seed := range []string{`{"position_ms": 61000}`, ` {"position_ms":0} `, "{\n\t\"position_ms\" :\r 7 }", `{"position_ms": 012}`,
		`{"position_ms": 1234567890123456789}`, `{"position_ms": 99999999999999999999}`, `{"position_ms": 5} }`, `{"position_ms": 5,}`,
		`{"POSITION_MS": 5}`, `{"position_ms": 5, "position_ms": 6}`, `{"position_ms": -0}`, `{"position_ms": 5.0}`, `{"position_ms": 5e3}`,
		// Past int64 with the 19 digits int64 can have, and its largest value.
		`{"position_ms": 9999999999999999999}`, `{"position_ms": 9223372036854775807}`, `{"position_ms": 9223372036854775808}`,
		// Whitespace JSON does not allow, a BOM, NUL and invalid UTF-8 around or inside the tokens.
		"{\f\"position_ms\": 5}", "{\"position_ms\":\v5}", "\u00a0{\"position_ms\": 5}", "\ufeff{\"position_ms\": 5}",
		"{\"position_ms\": 5}\x00", "{\"position_ms\x00\": 5}", "{\"position_ms\": 5}\xff", "{\"position_\xffms\": 5}",
		// Neither the plain reader's shape nor a position: null, strings, extra fields and objects, escapes.
		`null`, `{"position_ms": null}`, `{"position_ms": "5"}`, `{"position_ms": -1}`, `{"position_ms": 00}`, `{"position_ms": 5 6}`,
		`{"position_ms": 1, "x": 2}`, `{"x": 2, "position_ms": 1}`, `{"position_ms": 5}x`, `{"position_ms": 5}{"position_ms": 6}`,
		`{"position_ms" 5}`, `{"position_ms": }`, `{{"position_ms": 5}}`, `{"position_\u006ds": 5}`, `{"position_ms": 5`,
		`"position_ms": 5}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > playback.MaxBodyBytes {
			return
		}
		got, gotQ, gotErr := playback.ParseReport(body)
		want, wantQ, wantErr := playback.ParseReportJSON(body)
		if got != want || gotQ != wantQ || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || apperr.CodeOf(gotErr) != apperr.CodeOf(wantErr) {
			t.Fatalf("%q: ParsePosition gave %d, %v; encoding/json gives %d, %v", body, got, gotErr, want, wantErr)
		}
	})
}

// BenchmarkParsePosition reads a player's body with ParseReport (the plain reader) and with
// encoding/json alone (the reader before it, still the fallback), in the same run.
func BenchmarkParsePosition(b *testing.B) {
	body := []byte(`{"position_ms": 1834000}`)
	for _, bc := range []struct {
		name  string
		parse func([]byte) (int64, quality.Report, error)
	}{{"plain", playback.ParseReport}, {"encoding-json", playback.ParseReportJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if pos, _, err := bc.parse(body); pos != 1834000 || err != nil {
					b.Fatalf("%d, %v", pos, err)
				}
			}
		})
	}
}
