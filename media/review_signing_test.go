package media_test

import (
	"encoding/hex"
	"testing"

	"github.com/playhead/playhead/media"
)

// Hostile review (issue 36): the move of the key derivation claimed "unchanged bytes", but no
// test pinned them; a changed label would end every link a node of the previous version gave
// (and split a mixed-version cluster). The expected value is HMAC-SHA256(jwt secret, "playhead
// object URL signing key v1"), computed outside Go (Python's hmac).
func TestReview_SigningSecretFromKnownAnswer(t *testing.T) {
	got := hex.EncodeToString(media.SigningSecretFrom([]byte("jwt-secret-jwt-secret-jwt-secret-1")))
	const want = "f07fb73fd2d7f0fb1430d2c8a8f5d4bca63a0d6d42157feb1d8657b7e710c7e5"
	if got != want {
		t.Errorf("SigningSecretFrom = %s, want %s (the key of every signed link issued so far)", got, want)
	}
}
