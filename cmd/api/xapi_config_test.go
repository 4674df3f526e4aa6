package main

import "testing"

// TestConfig_XAPI: xAPI is off unless the endpoint is set; then the activity base is required,
// the actor home page defaults to it, and a URL that is not an absolute http(s) URL, carries
// credentials, or is a non-public address literal (unless PLAYHEAD_XAPI_ALLOW_PRIVATE) stops
// the start with the variable named.
func TestConfig_XAPI(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c xapiConfig)
	}{
		{name: "off", env: map[string]string{}, check: func(t *testing.T, c xapiConfig) {
			if c.Endpoint != "" || c.MaxAttempts != 12 || c.Timeout.String() != "15s" {
				t.Errorf("defaults %+v", c)
			}
		}},
		{name: "on", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "https://lrs.example/xapi", "PLAYHEAD_XAPI_ACTIVITY_BASE": "https://videos.example/"},
			check: func(t *testing.T, c xapiConfig) {
				if c.ActivityBase != "https://videos.example" || c.HomePage != "https://videos.example" {
					t.Errorf("base %q, home page %q; want the base without its slash for both", c.ActivityBase, c.HomePage)
				}
			}},
		{name: "no base", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "https://lrs.example/xapi"},
			wantErr: "PLAYHEAD_XAPI_ACTIVITY_BASE: required with PLAYHEAD_XAPI_ENDPOINT"},
		{name: "loopback", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "http://127.0.0.1:9000/xapi", "PLAYHEAD_XAPI_ACTIVITY_BASE": "https://videos.example"},
			wantErr: "PLAYHEAD_XAPI_ENDPOINT: address not allowed: 127.0.0.1"},
		{name: "loopback allowed", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "http://127.0.0.1:9000/xapi", "PLAYHEAD_XAPI_ACTIVITY_BASE": "https://videos.example", "PLAYHEAD_XAPI_ALLOW_PRIVATE": "true"}},
		{name: "credentials", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "https://key:secret@lrs.example/xapi", "PLAYHEAD_XAPI_ACTIVITY_BASE": "https://videos.example"},
			wantErr: "PLAYHEAD_XAPI_ENDPOINT: must have no user"},
		{name: "relative base", env: map[string]string{"PLAYHEAD_XAPI_ENDPOINT": "https://lrs.example/xapi", "PLAYHEAD_XAPI_ACTIVITY_BASE": "videos.example"},
			wantErr: "PLAYHEAD_XAPI_ACTIVITY_BASE: must be an absolute"},
		{name: "attempts", env: map[string]string{"PLAYHEAD_XAPI_MAX_ATTEMPTS": "0"}, wantErr: "PLAYHEAD_XAPI_MAX_ATTEMPTS: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, tc.env, tc.wantErr)
			if ok && tc.check != nil {
				tc.check(t, cfg.XAPI)
			}
		})
	}
}
