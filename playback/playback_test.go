package playback_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/playback"
)

func TestParsePosition(t *testing.T) {
	cases := []struct {
		body string
		want int64
		code apperr.Code
	}{
		{`{"position_ms": 61000}`, 61000, ""},
		{`{"position_ms": 0}`, 0, ""},
		{`{"position_ms": 5, "client": "ios"}`, 5, ""},
		{`{"position_ms": -1}`, 0, apperr.Unprocessable},
		{`{"position_ms": 1e3}`, 0, apperr.Unprocessable},
		{`{"position_ms": 99999999999999999999}`, 0, apperr.Unprocessable},
		{`{"position_ms": true}`, 0, apperr.Unprocessable},
		{`{}`, 0, apperr.Unprocessable},
		{`{"position_ms":`, 0, apperr.Invalid},
		{`null`, 0, apperr.Unprocessable},
		{``, 0, apperr.Invalid},
		{`{"position_ms": 1}}`, 0, apperr.Invalid},
	}
	for _, tc := range cases {
		got, err := playback.ParsePosition([]byte(tc.body))
		if tc.code == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParsePosition(%s) = %d, %v; want %d", tc.body, got, err, tc.want)
			}
			continue
		}
		if apperr.CodeOf(err) != tc.code {
			t.Errorf("ParsePosition(%s) error = %v, want code %s", tc.body, err, tc.code)
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
