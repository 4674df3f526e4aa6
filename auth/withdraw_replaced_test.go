package auth_test

import "testing"

// A key replaced under the same kid (an operator regenerating a leaked key and keeping its
// name) is withdrawn: the old key's cached tokens are refused at the read that replaces it,
// and the new key's tokens verify.
func TestCache_KeyReplacedUnderItsKidForgetsItsTokens(t *testing.T) {
	old, replacement := newEC(t, "main"), newEC(t, "main")
	server := newJWKSServer(t, old.jwk(t))
	bed := setup(t, server, nil, 1000)
	tok := old.mint(t, "viewer", nil)
	if _, err := bed.v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	server.publish(replacement.jwk(t))
	// A token of a kid the node does not hold makes it read the JWKS.
	bed.mustRefuse(t, newEC(t, "unpublished").mint(t, "x", nil), "unknown_key")
	if _, err := bed.v.Verify(replacement.mint(t, "viewer", nil)); err != nil {
		t.Fatalf("a token of the replacement key: %v", err)
	}
	bed.mustRefuse(t, tok, "bad_signature")
}
