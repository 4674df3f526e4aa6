package main

import (
	"crypto"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/playhead/playhead/auth"
)

// minter mints the players' and the admin's tokens: HS256 with the shared secret, or signed
// with a private key the way an operator's backend holding its own key pair does (Playhead in
// the JWKS file mode, the key's public half in PLAYHEAD_JWKS_FILE).
type minter struct {
	secret []byte
	// key and kid sign instead of the secret when key is set, with issuer and audience; the
	// admin's token carries adminClaim holding adminValue.
	key                    crypto.Signer
	kid                    string
	issuer, audience       string
	adminClaim, adminValue string
}

// keyMinter reads a private key (a JWK, or PEM with kid) for a minter like base.
func keyMinter(base minter, file, kid string) (minter, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return minter{}, err
	}
	key, jwkKID, err := auth.ParsePrivateKey(data)
	if err != nil {
		return minter{}, fmt.Errorf("%s: %w", file, err)
	}
	m := base
	m.key, m.kid = key, kid
	if m.kid == "" {
		m.kid = jwkKID
	}
	switch {
	case m.kid == "":
		return minter{}, fmt.Errorf("%s: a PEM key needs its kid (-signing-kid, -rotate-kid)", file)
	case m.issuer == "" || m.audience == "":
		return minter{}, errors.New("signing with a key needs -issuer and -audience (or PLAYHEAD_OIDC_ISSUER and PLAYHEAD_OIDC_AUDIENCE)")
	}
	return m, nil
}

// player mints the token of the player for member: with a key, its subject is
// "loadgen-<member>", a string the node maps to a member of its own.
func (m minter) player(member int64, ttl time.Duration) (string, error) {
	if m.key == nil {
		return auth.Mint(m.secret, member, false, ttl)
	}
	return auth.MintWithKey(m.key, m.kid, auth.KeyClaims{Issuer: m.issuer, Audience: m.audience,
		Subject: "loadgen-" + strconv.FormatInt(member, 10), TTL: ttl})
}

// admin mints the token that registers the media: member 1 with the secret, a subject with
// the admin claim with a key.
func (m minter) admin(ttl time.Duration) (string, error) {
	if m.key == nil {
		return auth.Mint(m.secret, 1, true, ttl)
	}
	if m.adminClaim == "" || m.adminValue == "" {
		return "", errors.New("signing with a key needs PLAYHEAD_OIDC_ADMIN_CLAIM and PLAYHEAD_OIDC_ADMIN_VALUE, the node's, for the admin token that registers the media")
	}
	return auth.MintWithKey(m.key, m.kid, auth.KeyClaims{Issuer: m.issuer, Audience: m.audience,
		Subject: "loadgen-admin", TTL: ttl, Extra: map[string]any{m.adminClaim: []string{m.adminValue}}})
}
