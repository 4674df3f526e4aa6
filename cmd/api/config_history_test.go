package main

import (
	"cmp"
	"testing"
	"time"
)

// TestConfig_HistoryRetention: the history is kept for ever unless PLAYHEAD_HISTORY_RETENTION
// says how long, in whole days or a Go duration of at least an hour; anything else stops the
// start with the variable named.
func TestConfig_HistoryRetention(t *testing.T) {
	const name = "PLAYHEAD_HISTORY_RETENTION"
	for _, tc := range []struct {
		value   string
		want    time.Duration
		wantErr string
	}{
		{value: "", want: 0},
		{value: "0", want: 0},
		{value: "540d", want: 540 * 24 * time.Hour},
		{value: "36h", want: 36 * time.Hour},
		{value: "1h", want: time.Hour},
		{value: "59m", wantErr: name + ": must be 0 (off) or at least 1h"},
		{value: "1.5d", wantErr: name + `: "1.5d" is not a duration`},
		{value: "-3d", wantErr: name + `: "-3d" is not a duration`},
		{value: "d", wantErr: name + `: "d" is not a duration`},
		{value: "99999999999d", wantErr: name + `: "99999999999d" is not a duration`},
	} {
		t.Run(cmp.Or(tc.value, "unset"), func(t *testing.T) {
			cfg, ok := loadTestConfig(t, map[string]string{name: tc.value}, tc.wantErr)
			if ok && cfg.HistoryRetention != tc.want {
				t.Errorf("HistoryRetention %s, want %s", cfg.HistoryRetention, tc.want)
			}
		})
	}
}
