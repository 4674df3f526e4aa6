package playback_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/playback"
	"github.com/playhead/playhead/quality"
)

func TestParseReport(t *testing.T) {
	full := quality.Report{StartupMS: 850, PlayedMS: 5000, RebufferCount: 2, RebufferMS: 1200, Height: 720, Error: 3,
		Has: quality.HasStartup | quality.HasPlayed | quality.HasRebufferCount | quality.HasRebufferMS | quality.HasHeight | quality.HasError}
	cases := []struct {
		body string
		want int64
		q    quality.Report
		code apperr.Code
	}{
		{`{"position_ms": 61000}`, 61000, quality.Report{}, ""},
		{`{"position_ms": 0}`, 0, quality.Report{}, ""},
		{`{"position_ms": 5, "client": "ios"}`, 5, quality.Report{}, ""},
		{`{"position_ms": -1}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 1e3}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 99999999999999999999}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": true}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms":`, 0, quality.Report{}, apperr.Invalid},
		{`null`, 0, quality.Report{}, apperr.Unprocessable},
		{``, 0, quality.Report{}, apperr.Invalid},
		{`{"position_ms": 1}}`, 0, quality.Report{}, apperr.Invalid},
		// The quality: every field, none, null, unknown fields ignored.
		{`{"position_ms": 7, "quality": {"startup_ms": 850, "played_ms": 5000, "rebuffer_count": 2, "rebuffer_ms": 1200,
			"rendition_height": 720, "error": "decode"}}`, 7, full, ""},
		{`{"position_ms": 7, "quality": {}}`, 7, quality.Report{}, ""},
		{`{"position_ms": 7, "quality": null}`, 7, quality.Report{}, ""},
		{`{"position_ms": 7, "quality": {"played_ms": 0, "dropped_frames": 3}}`, 7, quality.Report{Has: quality.HasPlayed}, ""},
		{`{"position_ms": 7, "quality": {"startup_ms": 600000}}`, 7, quality.Report{StartupMS: 600000, Has: quality.HasStartup}, ""},
		// Wrong types and values out of bounds: the whole report refused.
		{`{"position_ms": 7, "quality": 5}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": []}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"startup_ms": -1}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"startup_ms": 600001}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"startup_ms": "850"}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"played_ms": 1.5}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"rebuffer_count": 1001}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"rebuffer_ms": 99999999999999999999}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"rendition_height": 0}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"rendition_height": 8641}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"error": "DECODE"}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"error": 3}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": -1, "quality": {"startup_ms": 5}}`, 0, quality.Report{}, apperr.Unprocessable},
		{`{"position_ms": 7, "quality": {"startup_ms": 5}`, 0, quality.Report{}, apperr.Invalid},
	}
	for _, tc := range cases {
		got, q, err := playback.ParseReport([]byte(tc.body))
		if tc.code == "" {
			if err != nil || got != tc.want || q != tc.q {
				t.Errorf("ParseReport(%s) = %d, %+v, %v; want %d, %+v", tc.body, got, q, err, tc.want, tc.q)
			}
			continue
		}
		if apperr.CodeOf(err) != tc.code {
			t.Errorf("ParseReport(%s) error = %v, want code %s", tc.body, err, tc.code)
		}
	}
}

func TestCheckRange(t *testing.T) {
	if _, err := playback.CheckRange(60_000, 60_000); err != nil {
		t.Errorf("the last millisecond was refused: %v", err)
	}
	if _, err := playback.CheckRange(60_001, 60_000); apperr.CodeOf(err) != apperr.Unprocessable {
		t.Errorf("past the end: %v", err)
	}
	if _, err := playback.CheckRange(playback.MaxPositionMS, 0); err != nil {
		t.Errorf("24 h on unknown duration: %v", err)
	}
	if _, err := playback.CheckRange(playback.MaxPositionMS+1, 0); apperr.CodeOf(err) != apperr.Unprocessable {
		t.Errorf("past 24 h on unknown duration: %v", err)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c := playback.Cursor{EventTime: time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC), MediaID: 77}
	got, err := playback.DecodeCursor(playback.EncodeCursor(c))
	if err != nil || !got.EventTime.Equal(c.EventTime) || got.MediaID != 77 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "!!", "MTIz", "YS5i"} {
		if _, err := playback.DecodeCursor(bad); apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("DecodeCursor(%q) = %v, want invalid", bad, err)
		}
	}
}
