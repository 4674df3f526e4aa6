// Package auth verifies and mints the HS256 JWTs that identify members: the subject is the
// member id, an optional role claim "admin" opens the admin routes, and exp is required.
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/apperr"
)

// MinSecretBytes is the shortest accepted HS256 secret: the key should be as long as the hash.
const MinSecretBytes = 32

// RoleAdmin is the role claim value that opens the admin routes.
const RoleAdmin = "admin"

// Identity is who a verified token speaks for.
type Identity struct {
	MemberID int64
	Admin    bool
	// Expires is the token's exp: a long-lived response (the event stream) ends there, so a
	// connection cannot outlive the token that opened it.
	Expires time.Time
	// IssuedAt is the token's iat, zero when it has none: a route that needs a recent sign-in
	// (erasing one's account) checks it.
	IssuedAt time.Time
}

// Claims is the token body.
type Claims struct {
	jwt.RegisteredClaims
	Role string `json:"role,omitempty"`
}

// Verifier checks tokens signed with one secret.
type Verifier struct {
	secret []byte
	parser *jwt.Parser
	// verified remembers tokens that passed, until they expire (at most cacheTTL): a player
	// sends the same token every 5 seconds, and decoding and checking it each time was a
	// quarter of the server's CPU at 20 000 requests/s. Nil when caching is off.
	verified *tokenCache
	// refused says whether a member's tokens are refused whatever they say (an erased member).
	// Set by Refuse before the verifier is used; nil refuses no one.
	refused func(member int64) bool
}

// Refuse makes v refuse every token whose member refused reports, in front of the cache: a
// token verified before its member was erased answers 401 from then on. Call it before v is
// used.
func (v *Verifier) Refuse(refused func(member int64) bool) { v.refused = refused }

// errRefused is the answer to a token of a member Refuse names.
var errRefused = apperr.Errorf(apperr.Unauthenticated, "this member is erased; sign in as another member")

type verified struct {
	id      Identity
	expires time.Time
}

// cacheTTL bounds how long a verified token is trusted without checking it again.
const cacheTTL = 10 * time.Minute

// NewVerifier returns a Verifier for secret, which must be at least MinSecretBytes long.
// cacheItems > 0 remembers up to about that many verified tokens.
func NewVerifier(secret []byte, cacheItems int) (*Verifier, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("JWT secret is %d bytes, need at least %d", len(secret), MinSecretBytes)
	}
	v := &Verifier{
		secret: secret,
		// Only HS256: accepting the algorithm named by the token is the classic JWT hole.
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired()),
	}
	if cacheItems > 0 {
		v.verified = newTokenCache(cacheItems)
	}
	return v, nil
}

// Verify parses a compact token and returns its identity. Every failure is an
// apperr.Unauthenticated error.
func (v *Verifier) Verify(token string) (Identity, error) {
	id, err := v.verify(token)
	if err == nil && v.refused != nil && v.refused(id.MemberID) {
		return Identity{}, errRefused
	}
	return id, err
}

func (v *Verifier) verify(token string) (Identity, error) {
	if v.verified == nil {
		id, _, err := v.verifyWithExpiry(token)
		return id, err
	}
	now := time.Now()
	if id, ok := v.verified.get(token, now); ok {
		return id, nil
	}
	id, exp, err := v.verifyWithExpiry(token)
	if err != nil {
		return Identity{}, err
	}
	if ttl := min(exp.Sub(now), cacheTTL); ttl > 0 {
		v.verified.put(token, verified{id: id, expires: now.Add(ttl)}, now)
	}
	return id, nil
}

func (v *Verifier) verifyWithExpiry(token string) (Identity, time.Time, error) {
	var claims Claims
	_, err := v.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return Identity{}, time.Time{}, apperr.Errorf(apperr.Unauthenticated, "token expired")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			return Identity{}, time.Time{}, apperr.Errorf(apperr.Unauthenticated, "token has no exp claim")
		default:
			return Identity{}, time.Time{}, apperr.Errorf(apperr.Unauthenticated, "invalid token")
		}
	}
	member, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || member <= 0 {
		return Identity{}, time.Time{}, apperr.Errorf(apperr.Unauthenticated, "token subject is not a member id")
	}
	exp := claims.ExpiresAt.Time
	id := Identity{MemberID: member, Admin: claims.Role == RoleAdmin, Expires: exp}
	if claims.IssuedAt != nil {
		id.IssuedAt = claims.IssuedAt.Time
	}
	return id, exp, nil
}

// Mint signs a token for member that expires after ttl.
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

const localsKey = "playhead.identity"

// Middleware rejects requests without a valid bearer token and stores the identity for From.
// The token is only ever taken from the Authorization header: the browser's own requests for
// media files carry signed URLs instead (media.Signer), so no cookie holds a token.
func (v *Verifier) Middleware() fiber.Handler {
	return func(c *fiber.Ctx) error {
		header := c.Get(fiber.HeaderAuthorization)
		token, ok := strings.CutPrefix(header, "Bearer ")
		if !ok || token == "" {
			return apperr.Errorf(apperr.Unauthenticated, "missing bearer token")
		}
		id, err := v.Verify(token)
		if err != nil {
			return err
		}
		c.Locals(localsKey, id)
		return c.Next()
	}
}

// RequireAdmin rejects identities without the admin role. It runs after Middleware.
func RequireAdmin(c *fiber.Ctx) error {
	if !From(c).Admin {
		return apperr.Errorf(apperr.Forbidden, "admin role required")
	}
	return c.Next()
}

// From returns the identity Middleware stored. Routes behind Middleware always have one.
func From(c *fiber.Ctx) Identity {
	id, _ := c.Locals(localsKey).(Identity)
	return id
}
