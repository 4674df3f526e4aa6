package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/apperr"
)

// header is what a compact token's header says, read without verifying anything: the alg
// picks which mode checks the token, the kid labels its cache entry.
type header struct {
	Alg string
	Kid string
	// Crit lists extensions the issuer says a recipient must understand (RFC 7515 4.1.11).
	// Playhead understands none, so a token naming any is refused rather than read without
	// them.
	Crit bool
}

// tokenHeader decodes a compact token's header the way golang-jwt does, into a map: its keys
// match exactly, where a struct's would match in any letter case. A header with "kid" unset
// and "KID" naming another key must not label the cache entry with that other key, which
// golang-jwt never looked at.
func tokenHeader(token string) (h header, ok bool) {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return header{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return header{}, false
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return header{}, false
	}
	h.Alg, _ = m["alg"].(string)
	h.Kid, _ = m["kid"].(string)
	_, h.Crit = m["crit"]
	return h, true
}

// verifyKeys checks a provider token against the key set and maps its subject to a member.
func (v *Verifier) verifyKeys(ctx context.Context, token string) (Identity, time.Time, error) {
	claims := jwt.MapClaims{}
	if _, err := v.keysParser.ParseWithClaims(token, claims, v.cfg.Keys.keyfunc); err != nil {
		return Identity{}, time.Time{}, v.parseError(err)
	}
	subject, _ := claims["sub"].(string)
	switch {
	case subject == "":
		return Identity{}, time.Time{}, v.refusal(reasonSubject, "token has no subject")
	case len(subject) > MaxSubjectBytes:
		return Identity{}, time.Time{}, v.refusal(reasonSubject, "token subject longer than %d bytes", MaxSubjectBytes)
	}
	exp, _ := claims.GetExpirationTime() // the parser required it
	id := Identity{Expires: exp.Time, Issuer: v.cfg.Issuer, Subject: subject,
		Admin: v.cfg.AdminClaim != "" && hasValue(claims, v.cfg.AdminClaim, v.cfg.AdminValue)}
	if iat, err := claims.GetIssuedAt(); err == nil && iat != nil {
		id.IssuedAt = iat.Time
	}
	member, err := v.cfg.Subjects.Member(ctx, v.cfg.Issuer, subject, id.IssuedAt)
	if err != nil {
		if e, ok := errors.AsType[*apperr.Error](err); ok && e.Code == apperr.Unauthenticated {
			v.cfg.Metrics.refuse(reasonSubject)
			return Identity{}, time.Time{}, err
		}
		// Not the token's fault: the mapping's database is away. 503 asks the client to retry.
		return Identity{}, time.Time{}, apperr.Errorf(apperr.Unavailable, "members cannot be looked up now; retry later")
	}
	id.MemberID = member
	return id, exp.Time, nil
}

// hasValue reports whether claims hold want at claim: a top-level claim of that exact name
// first (Auth0's namespaced "https://example.com/roles" has dots of its own), else a dotted
// path into nested objects (Keycloak's "realm_access.roles"). The value matches when it is a
// string equal to want, an array holding want, or, for a claim named scope or scp, a
// space-separated string with want among its words. Only a scope is split: a subject or a
// role name with a space in it ("mallory playhead-admin") must not match.
func hasValue(claims map[string]any, claim, want string) bool {
	v, ok := claims[claim]
	if !ok {
		var cur any = claims
		for part := range strings.SplitSeq(claim, ".") {
			m, isMap := cur.(map[string]any)
			if !isMap {
				return false
			}
			if cur, ok = m[part]; !ok {
				return false
			}
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		if v == want {
			return true
		}
		// A scope's words are separated by single spaces (RFC 6749 3.3), no other white space.
		if name := claim[strings.LastIndex(claim, ".")+1:]; name == "scope" || name == "scp" {
			for w := range strings.SplitSeq(v, " ") {
				if w == want {
					return true
				}
			}
		}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}
