package auth_test

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The cache entry's kid is the one the key was found by: a token signed by a key about to be
// withdrawn, whose header has no "kid" but a "KID" naming a key that stays (a holder of a
// leaked key can write that), is verified by trying every key, and is refused once its key is
// withdrawn, though it sits in the cache and the kid its "KID" names is still published.
func TestCache_WithdrawnKeyForgetsTokensOfAnyKidSpelling(t *testing.T) {
	leaked, kept, next := newRSA(t, "leaked"), newRSA(t, "kept"), newRSA(t, "next")
	server := newJWKSServer(t, leaked.jwk(t), kept.jwk(t))
	bed := setup(t, server, nil, 1000)
	tok := rawSigned(`{"alg":"RS256","KID":"kept"}`, jwt.SigningMethodRS256, leaked.key, claims(time.Hour))
	if _, err := bed.v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	server.publish(kept.jwk(t), next.jwk(t))
	if _, err := bed.v.Verify(next.mint(t, "viewer-next", nil)); err != nil {
		t.Fatalf("a token of the newly published key: %v", err)
	}
	bed.mustRefuse(t, tok, "bad_signature")
}
