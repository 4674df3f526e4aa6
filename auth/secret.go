package auth

import (
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxSecretMember is the largest member id a secret-mode token's subject may name: the ids
// above it are members known by a provider's subject (members.FirstID on), and whoever holds
// the shared secret must not speak for one of them.
const MaxSecretMember int64 = 1<<40 - 1

// verifySecret checks an HS256 token against the secret: its subject is the member id.
func (v *Verifier) verifySecret(token string) (Identity, time.Time, error) {
	var claims Claims
	if _, err := v.secretParser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.cfg.Secret, nil }); err != nil {
		return Identity{}, time.Time{}, v.parseError(err)
	}
	member, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || member <= 0 || member > MaxSecretMember {
		return Identity{}, time.Time{}, v.refusal(reasonSubject, "token subject is not a member id")
	}
	exp := claims.ExpiresAt.Time
	id := Identity{MemberID: member, Admin: claims.Role == RoleAdmin, Expires: exp}
	if claims.IssuedAt != nil {
		id.IssuedAt = claims.IssuedAt.Time
	}
	return id, exp, nil
}

// Mint signs an HS256 token for member that expires after ttl.
func Mint(secret []byte, member int64, admin bool, ttl time.Duration) (string, error) {
	now := time.Now()
	claims := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(member, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if admin {
		claims.Role = RoleAdmin
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
