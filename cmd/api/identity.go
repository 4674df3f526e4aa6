package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/auth"
)

// IdentityConfig is the identity provider whose tokens the API accepts (the "Identity"
// settings). Empty Issuer: only the HS256 secret's tokens.
type IdentityConfig struct {
	Issuer     string        // PLAYHEAD_OIDC_ISSUER
	Audience   string        // PLAYHEAD_OIDC_AUDIENCE
	JWKSURL    string        // PLAYHEAD_JWKS_URL; "" discovers it from Issuer
	JWKSFile   string        // PLAYHEAD_JWKS_FILE
	AdminClaim string        // PLAYHEAD_OIDC_ADMIN_CLAIM; "" makes no provider token admin
	AdminValue string        // PLAYHEAD_OIDC_ADMIN_VALUE
	Leeway     time.Duration // PLAYHEAD_TOKEN_LEEWAY
}

func (e *env) identity() IdentityConfig {
	return IdentityConfig{
		Issuer:     e.str("PLAYHEAD_OIDC_ISSUER"),
		Audience:   e.str("PLAYHEAD_OIDC_AUDIENCE"),
		JWKSURL:    e.str("PLAYHEAD_JWKS_URL"),
		JWKSFile:   e.str("PLAYHEAD_JWKS_FILE"),
		AdminClaim: e.str("PLAYHEAD_OIDC_ADMIN_CLAIM"),
		AdminValue: e.str("PLAYHEAD_OIDC_ADMIN_VALUE"),
		Leeway:     e.duration("PLAYHEAD_TOKEN_LEEWAY"),
	}
}

func (c Config) validateIdentity(e *env) {
	id := c.Identity
	e.check(c.JWTSecret != "" || id.Issuer != "",
		"PLAYHEAD_JWT_SECRET: required unless PLAYHEAD_OIDC_ISSUER names an identity provider (make run generates one)")
	e.check(c.JWTSecret == "" || len(c.JWTSecret) >= auth.MinSecretBytes,
		"PLAYHEAD_JWT_SECRET: must be at least %d bytes (make run generates one)", auth.MinSecretBytes)
	e.check(c.JWTSecret != "" || c.URLSigningSecret != "" || c.URLSigningKeys != "",
		"PLAYHEAD_URL_SIGNING_SECRET or PLAYHEAD_URL_SIGNING_KEYS: required when PLAYHEAD_JWT_SECRET is unset (the legacy URL-signing key is derived from it otherwise)")
	e.check(id.Leeway >= time.Second && id.Leeway <= 5*time.Minute, "PLAYHEAD_TOKEN_LEEWAY: must be from 1s to 5m")
	if id.Issuer == "" {
		e.check(id.JWKSURL == "" && id.JWKSFile == "" && id.Audience == "" && id.AdminClaim == "",
			"PLAYHEAD_OIDC_ISSUER: required with PLAYHEAD_JWKS_URL, PLAYHEAD_JWKS_FILE, PLAYHEAD_OIDC_AUDIENCE or PLAYHEAD_OIDC_ADMIN_CLAIM (a provider token's iss must equal it)")
		return
	}
	e.check(httpURL(id.Issuer), "PLAYHEAD_OIDC_ISSUER: %q is not an http(s) URL", id.Issuer)
	e.check(id.Audience != "", "PLAYHEAD_OIDC_AUDIENCE: required with PLAYHEAD_OIDC_ISSUER (a provider token's aud must contain it)")
	e.check(id.JWKSURL == "" || id.JWKSFile == "", "PLAYHEAD_JWKS_URL and PLAYHEAD_JWKS_FILE: set one, not both")
	e.check(id.JWKSURL == "" || httpURL(id.JWKSURL), "PLAYHEAD_JWKS_URL: %q is not an http(s) URL", id.JWKSURL)
	e.check((id.AdminClaim == "") == (id.AdminValue == ""), "PLAYHEAD_OIDC_ADMIN_CLAIM and PLAYHEAD_OIDC_ADMIN_VALUE: set both or neither")
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// newVerifier builds the token verifier: the secret's mode when PLAYHEAD_JWT_SECRET is set, the
// provider's keys when PLAYHEAD_OIDC_ISSUER is (then keys is the key set to start, else nil).
func newVerifier(c Config, subjects auth.Subjects, reg prometheus.Registerer, logger *slog.Logger) (v *auth.Verifier, keys *auth.KeySet, err error) {
	metrics := auth.NewMetrics(reg)
	cfg := auth.Config{CacheItems: tokenCacheItems, Metrics: metrics}
	if c.JWTSecret != "" {
		cfg.Secret = []byte(c.JWTSecret)
	}
	if id := c.Identity; id.Issuer != "" {
		keys, err = auth.NewKeySet(auth.KeysConfig{URL: id.JWKSURL, File: id.JWKSFile, Issuer: id.Issuer, Logger: logger, Metrics: metrics})
		if err != nil {
			return nil, nil, fmt.Errorf("identity provider: %w", err)
		}
		cfg.Keys, cfg.Issuer, cfg.Audience, cfg.Subjects = keys, id.Issuer, id.Audience, subjects
		cfg.AdminClaim, cfg.AdminValue, cfg.Leeway = id.AdminClaim, id.AdminValue, id.Leeway
	}
	v, err = auth.New(cfg)
	return v, keys, err
}
