package main

import (
	"testing"
	"time"

	"github.com/playhead/playhead/media"
)

// TestConfig_ResumeThresholds: unset, the resume thresholds are media.DefaultCompletion's; 0 and
// the bounds are taken; a negative minimum or shortest duration, or a ratio outside 0 to 0.5,
// stops the start, naming the variable.
func TestConfig_ResumeThresholds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
		want    media.Completion
	}{
		{name: "defaults", env: map[string]string{}, want: media.DefaultCompletion},
		{name: "none", env: map[string]string{"PLAYHEAD_RESUME_MIN_RATIO": "0", "PLAYHEAD_RESUME_MIN": "0s", "PLAYHEAD_RESUME_MIN_DURATION": "0s"},
			want: media.Completion{Ratio: 0.95, Tail: 30 * time.Second}},
		{name: "half", env: map[string]string{"PLAYHEAD_RESUME_MIN_RATIO": "0.5"},
			want: media.Completion{Ratio: 0.95, Tail: 30 * time.Second, MinRatio: 0.5, Min: time.Minute, MinDuration: 2 * time.Minute}},
		{name: "negative ratio", env: map[string]string{"PLAYHEAD_RESUME_MIN_RATIO": "-0.01"}, wantErr: "PLAYHEAD_RESUME_MIN_RATIO: must be from 0 to 0.5"},
		{name: "ratio past the middle", env: map[string]string{"PLAYHEAD_RESUME_MIN_RATIO": "0.51"}, wantErr: "PLAYHEAD_RESUME_MIN_RATIO: must be from 0 to 0.5"},
		{name: "negative minimum", env: map[string]string{"PLAYHEAD_RESUME_MIN": "-1s"}, wantErr: "PLAYHEAD_RESUME_MIN: must not be negative"},
		{name: "negative duration", env: map[string]string{"PLAYHEAD_RESUME_MIN_DURATION": "-1ms"}, wantErr: "PLAYHEAD_RESUME_MIN_DURATION: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, tc.env, tc.wantErr)
			if ok && cfg.Completion != tc.want {
				t.Errorf("completion %+v, want %+v", cfg.Completion, tc.want)
			}
		})
	}
}
