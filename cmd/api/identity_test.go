package main

import (
	"testing"
)

// TestConfig_Identity: the secret, a provider or both; a provider needs its audience; the
// JWKS comes from discovery, a URL or a file, not two; the admin claim and value go together.
func TestConfig_Identity(t *testing.T) {
	const issuer = "https://id.example.com/"
	signing := "url-signing-secret-url-signing-secret-0"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"secret alone", map[string]string{}, ""},
		{"provider alone", map[string]string{"PLAYHEAD_JWT_SECRET": "", "PLAYHEAD_URL_SIGNING_SECRET": signing,
			"PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": "playhead"}, ""},
		{"both, a file and an admin claim", map[string]string{"PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": "playhead",
			"PLAYHEAD_JWKS_FILE": "/etc/playhead/jwks.json", "PLAYHEAD_OIDC_ADMIN_CLAIM": "realm_access.roles", "PLAYHEAD_OIDC_ADMIN_VALUE": "admin"}, ""},
		{"neither", map[string]string{"PLAYHEAD_JWT_SECRET": ""}, "PLAYHEAD_JWT_SECRET: required unless PLAYHEAD_OIDC_ISSUER"},
		{"short secret", map[string]string{"PLAYHEAD_JWT_SECRET": "short"}, "PLAYHEAD_JWT_SECRET: must be at least 32 bytes"},
		{"provider without a link key", map[string]string{"PLAYHEAD_JWT_SECRET": "", "PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": "playhead"},
			"PLAYHEAD_URL_SIGNING_KEYS: required when PLAYHEAD_JWT_SECRET is unset"},
		{"no audience", map[string]string{"PLAYHEAD_OIDC_ISSUER": issuer}, "PLAYHEAD_OIDC_AUDIENCE: required"},
		{"a URL without an issuer", map[string]string{"PLAYHEAD_JWKS_URL": "https://id.example.com/keys"}, "PLAYHEAD_OIDC_ISSUER: required with"},
		{"issuer not a URL", map[string]string{"PLAYHEAD_OIDC_ISSUER": "id.example.com", "PLAYHEAD_OIDC_AUDIENCE": "a"}, "PLAYHEAD_OIDC_ISSUER: \"id.example.com\" is not an http(s) URL"},
		{"URL and file", map[string]string{"PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": "a",
			"PLAYHEAD_JWKS_URL": "https://id.example.com/keys", "PLAYHEAD_JWKS_FILE": "/k.json"}, "set one, not both"},
		{"claim without value", map[string]string{"PLAYHEAD_OIDC_ISSUER": issuer, "PLAYHEAD_OIDC_AUDIENCE": "a",
			"PLAYHEAD_OIDC_ADMIN_CLAIM": "roles"}, "set both or neither"},
		{"leeway too long", map[string]string{"PLAYHEAD_TOKEN_LEEWAY": "10m"}, "PLAYHEAD_TOKEN_LEEWAY: must be from 1s to 5m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadTestConfig(t, tc.env, tc.wantErr)
			if ok && tc.env["PLAYHEAD_OIDC_ISSUER"] != "" && cfg.Identity.Issuer != issuer {
				t.Errorf("Identity.Issuer = %q", cfg.Identity.Issuer)
			}
		})
	}
}
