package auth_test

import (
	"testing"
)

// A key withdrawn from the JWKS stops its tokens at the read that withdraws it, though they
// are in the verified-token cache (which would otherwise trust them up to 10 minutes); the
// cached tokens of keys still published keep being served from the cache.
func TestCache_WithdrawnKeyForgetsItsTokens(t *testing.T) {
	a, b, c := newEC(t, "key-a"), newEC(t, "key-b"), newEC(t, "key-c")
	server := newJWKSServer(t, a.jwk(t), b.jwk(t))
	bed := setup(t, server, nil, 1000)
	tokA, tokB := a.mint(t, "viewer-a", nil), b.mint(t, "viewer-b", nil)
	for _, tok := range []string{tokA, tokB} {
		if _, err := bed.v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}

	// The rotation withdraws key-b: a token of the new key-c makes the node read the JWKS.
	server.publish(a.jwk(t), c.jwk(t))
	if _, err := bed.v.Verify(c.mint(t, "viewer-c", nil)); err != nil {
		t.Fatalf("a token of the newly published key: %v", err)
	}
	calls := bed.subjects.calls
	if _, err := bed.v.Verify(tokA); err != nil {
		t.Fatalf("a cached token of a key still published: %v", err)
	}
	if bed.subjects.calls != calls {
		t.Fatal("a cached token of a key still published was verified again, not served from the cache")
	}
	bed.mustRefuse(t, tokB, "unknown_key")
}
