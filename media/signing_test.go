package media_test

import (
	"bytes"
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
