package main

import "testing"

// TestConfig_SignInClientID: the pages' sign-in is off unless PLAYHEAD_OIDC_CLIENT_ID is set,
// goes to PLAYHEAD_OIDC_ISSUER's provider with PLAYHEAD_OIDC_AUDIENCE when it is, and needs an
// issuer.
func TestConfig_SignInClientID(t *testing.T) {
	cfg, _ := loadTestConfig(t, map[string]string{"PLAYHEAD_OIDC_CLIENT_ID": ""}, "")
	if s := cfg.pagesSignIn(); s != nil {
		t.Errorf("no client id: sign-in %+v, want none", s)
	}
	cfg, _ = loadTestConfig(t, map[string]string{"PLAYHEAD_OIDC_CLIENT_ID": "pages", "PLAYHEAD_OIDC_ISSUER": "https://idp.example/",
		"PLAYHEAD_OIDC_AUDIENCE": "https://api.example"}, "")
	if s := cfg.pagesSignIn(); s == nil || s.Issuer != "https://idp.example/" || s.ClientID != "pages" || s.Audience != "https://api.example" {
		t.Errorf("sign-in %+v, want the issuer's provider, client pages, the API's audience", s)
	}
	loadTestConfig(t, map[string]string{"PLAYHEAD_OIDC_CLIENT_ID": "pages", "PLAYHEAD_OIDC_ISSUER": ""},
		"PLAYHEAD_OIDC_CLIENT_ID: needs PLAYHEAD_OIDC_ISSUER")
}
