package media_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/playhead/playhead/media"
)

// The derived signing secret is a Signer's key (long enough), the same on every node with the
// same JWT secret, different for another JWT secret, and never the JWT secret itself (a
// token's signature must not be a URL's).
func TestSigningSecretFrom(t *testing.T) {
	jwt := []byte("jwt-secret-jwt-secret-jwt-secret-1")
	key := media.SigningSecretFrom(jwt)
	if _, err := media.NewSigner(key); err != nil {
		t.Fatalf("the derived secret is no Signer key: %v", err)
	}
	if !bytes.Equal(key, media.SigningSecretFrom(bytes.Clone(jwt))) {
		t.Error("two nodes with the same JWT secret derive different signing secrets")
	}
	if bytes.Equal(key, media.SigningSecretFrom([]byte("jwt-secret-jwt-secret-jwt-secret-2"))) {
		t.Error("another JWT secret derives the same signing secret")
	}
	if bytes.Contains(key, jwt) || bytes.Contains(jwt, key) {
		t.Error("the signing secret is the JWT secret")
	}
}

// The derivation's bytes are pinned: a changed label would end every link a node of the
// previous version gave (and split a mixed-version cluster). The expected value is
// HMAC-SHA256(jwt secret, "playhead object URL signing key v1"), computed outside Go
// (Python's hmac), so a change to the derivation fails here and not in production.
func TestSigningSecretFrom_KnownAnswer(t *testing.T) {
	got := hex.EncodeToString(media.SigningSecretFrom([]byte("jwt-secret-jwt-secret-jwt-secret-1")))
	const want = "f07fb73fd2d7f0fb1430d2c8a8f5d4bca63a0d6d42157feb1d8657b7e710c7e5"
	if got != want {
		t.Errorf("SigningSecretFrom = %s, want %s (the key of every signed link issued so far)", got, want)
	}
}
