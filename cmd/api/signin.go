package main

import "github.com/playhead/playhead/web"

// validateSignIn checks PLAYHEAD_OIDC_CLIENT_ID: the pages' sign-in goes to the provider of
// PLAYHEAD_OIDC_ISSUER, so it needs one.
func (c Config) validateSignIn(e *env) {
	e.check(c.SignInClientID == "" || c.Identity.Issuer != "",
		"PLAYHEAD_OIDC_CLIENT_ID: needs PLAYHEAD_OIDC_ISSUER (the provider the pages sign in with)")
}

// pagesSignIn is the provider of the pages' "Sign in", or nil without PLAYHEAD_OIDC_CLIENT_ID.
func (c Config) pagesSignIn() *web.SignIn {
	if c.SignInClientID == "" {
		return nil
	}
	return &web.SignIn{Issuer: c.Identity.Issuer, ClientID: c.SignInClientID, Audience: c.Identity.Audience}
}
