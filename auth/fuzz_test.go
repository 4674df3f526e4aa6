package auth_test

import (
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

// FuzzVerify: no input crashes the verifier; anything it accepts names a real member, and
// anything else is an Unauthenticated error.
func FuzzVerify(f *testing.F) {
	good, _ := auth.Mint(secret, 42, true, time.Hour)
	for _, seed := range []string{good, good + "x", good[:len(good)-2], "a.b.c", "", "....", "eyJhbGciOiJub25lIn0.e30.",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.", "Bearer " + good} {
		f.Add(seed)
	}
	v, err := auth.NewVerifier(secret, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, err := v.Verify(token)
		if err != nil {
			if apperr.CodeOf(err) != apperr.Unauthenticated {
				t.Fatalf("Verify(%q) = %v, want unauthenticated", token, err)
			}
			return
		}
		if id.MemberID <= 0 {
			t.Fatalf("Verify(%q) accepted member %d", token, id.MemberID)
		}
	})
}
