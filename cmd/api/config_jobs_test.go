package main

import (
	"cmp"
	"testing"
)

// TestConfig_JobsFairAndLimits: the media kinds take turns by owner unless PLAYHEAD_JOBS_FAIR
// is false; the cluster-wide limits are 0 (none) unless set, and a negative one stops the start
// with its variable named.
func TestConfig_JobsFairAndLimits(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{{"", true}, {"true", true}, {"false", false}} {
		t.Run("PLAYHEAD_JOBS_FAIR="+cmp.Or(tc.value, "unset"), func(t *testing.T) {
			if cfg, ok := loadTestConfig(t, map[string]string{"PLAYHEAD_JOBS_FAIR": tc.value}, ""); ok && cfg.JobsFair != tc.want {
				t.Errorf("JobsFair %t, want %t", cfg.JobsFair, tc.want)
			}
		})
	}
	for name, field := range map[string]func(Config) int{
		"PLAYHEAD_ENCODE_MAX_RUNNING":  func(c Config) int { return c.EncodeMaxRunning },
		"PLAYHEAD_INGEST_MAX_RUNNING":  func(c Config) int { return c.IngestMaxRunning },
		"PLAYHEAD_WEBHOOK_MAX_RUNNING": func(c Config) int { return c.WebhookMaxRunning },
	} {
		for _, tc := range []struct {
			value   string
			want    int
			wantErr string
		}{
			{value: "", want: 0},
			{value: "3", want: 3},
			{value: "-1", wantErr: name + ": must not be negative"},
			{value: "three", wantErr: name},
		} {
			t.Run(name+"="+cmp.Or(tc.value, "unset"), func(t *testing.T) {
				if cfg, ok := loadTestConfig(t, map[string]string{name: tc.value}, tc.wantErr); ok && field(cfg) != tc.want {
					t.Errorf("%s gives %d, want %d", name, field(cfg), tc.want)
				}
			})
		}
	}
}
