package auth_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A key's type must fit the token's alg even when its JWK names no alg: an RS256 token under
// an EC key's kid, an ES256 one under an RSA key's and an EdDSA one under an EC key's are
// refused, each signed by the attacker's own key of the right type.
func TestKeys_KeyTypeMustFitTheAlgorithm(t *testing.T) {
	rs, es := newRSA(t, "rs-any"), newEC(t, "es-any")
	noAlg := func(raw json.RawMessage) json.RawMessage {
		m := map[string]any{}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "alg")
		return must(json.Marshal(m))
	}
	b := setup(t, newJWKSServer(t, noAlg(rs.jwk(t)), noAlg(es.jwk(t))), nil, 0)
	for _, s := range []signer{rs, es} {
		if _, err := b.v.Verify(s.mint(t, "ok", nil)); err != nil {
			t.Fatalf("%s's own token: %v", s.kid, err)
		}
	}
	attackerRS, attackerES, attackerEd := newRSA(t, "es-any"), newEC(t, "rs-any"), newEd(t, "es-any")
	for name, token := range map[string]string{
		"RS256 under the EC key":  attackerRS.mint(t, "x", nil),
		"ES256 under the RSA key": attackerES.mint(t, "x", nil),
		"EdDSA under the EC key":  attackerEd.mint(t, "x", nil),
		"HS256 under the RSA key": func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(time.Hour))
			tok.Header["kid"] = "rs-any"
			return must(tok.SignedString([]byte("a secret the verifier does not hold at all")))
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if id, err := b.v.Verify(token); err == nil {
				t.Fatalf("accepted: %+v", id)
			}
		})
	}
}
