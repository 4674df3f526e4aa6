package auth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestVerifier_Verify(t *testing.T) {
	for _, cacheItems := range []int{0, 1000} {
		t.Run(fmt.Sprintf("cache=%d", cacheItems), func(t *testing.T) {
			v, err := auth.NewVerifier(secret, cacheItems)
			if err != nil {
				t.Fatal(err)
			}
			testVerify(t, v)
		})
	}
}

func testVerify(t *testing.T, v *auth.Verifier) {
	good, err := auth.Mint(secret, 42, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the second and third from the cache, when there is one
		id, err := v.Verify(good)
		if err != nil || id.MemberID != 42 || !id.Admin {
			t.Fatalf("Verify(minted) = %+v, %v", id, err)
		}
	}
	last, _ := auth.Mint(secret, auth.MaxSecretMember, false, time.Hour)
	if id, err := v.Verify(last); err != nil || id.MemberID != 1<<40-1 {
		t.Fatalf("Verify(the largest secret-mode member) = %+v, %v", id, err)
	}
	member, _ := auth.Mint(secret, 7, false, time.Hour)
	if id, err := v.Verify(member); err != nil || id.Admin {
		t.Fatalf("Verify(member) = %+v, %v; want no admin role", id, err)
	}

	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	future := time.Now().Add(time.Hour).Unix()
	bad := map[string]string{
		"Expired":      sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1", "exp": time.Now().Add(-time.Second).Unix()}),
		"NoExp":        sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1"}),
		"OtherSecret":  sign(jwt.SigningMethodHS256, []byte("fedcba9876543210fedcba9876543210"), jwt.MapClaims{"sub": "1", "exp": future}),
		"HS384":        sign(jwt.SigningMethodHS384, secret, jwt.MapClaims{"sub": "1", "exp": future}),
		"None":         sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "1", "exp": future}),
		"SubNotNumber": sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "bob", "exp": future}),
		"SubZero":      sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "0", "exp": future}),
		// From 2^40 the ids are members known by a provider's subject: the secret's holder
		// cannot speak for them.
		"SubProviderMember": sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1099511627776", "exp": future}),
		"NoSub":             sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": future}),
		"SubNegative":       sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "-1", "exp": future}),
		"SubExponent":       sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1e3", "exp": future}),
		"SubAboveInt64":     sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "9223372036854775808", "exp": future}),
		"SubNumber":         sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": 5, "exp": future}),
		"Garbage":           "a.b.c",
		"Empty":             "",
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := v.Verify(tok); apperr.CodeOf(err) != apperr.Unauthenticated {
				t.Fatalf("Verify = %v, want unauthenticated", err)
			}
		})
	}
}

// A cached token stops being accepted when it expires.
func TestVerifier_CachedTokenExpires(t *testing.T) {
	v, err := auth.NewVerifier(secret, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// exp has a resolution of one second: this token expires within the next two.
	tok, _ := auth.Mint(secret, 9, false, 1500*time.Millisecond)
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Verify(tok)
		if apperr.CodeOf(err) == apperr.Unauthenticated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired token is still accepted (from the cache)")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNewVerifier_RejectsShortSecret(t *testing.T) {
	if _, err := auth.NewVerifier([]byte("short"), 0); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
}
