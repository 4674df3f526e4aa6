// Package auth verifies the bearer tokens that identify members. Two modes, combinable: an
// HS256 secret (the subject is the member id, a role claim "admin" opens the admin routes),
// and an identity provider's keys (a KeySet: OIDC discovery, a JWKS URL or a JWKS file;
// RS256, PS256, ES256, EdDSA; iss and aud checked; the subject mapped to a member through
// Subjects; the admin role from a configured claim). A token's header alg picks the mode: HS256
// only ever meets the secret, anything else only the key set.
package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/apperr"
)

// MinSecretBytes is the shortest accepted HS256 secret: the key should be as long as the hash.
const MinSecretBytes = 32

// RoleAdmin is the role claim value that opens the admin routes in secret mode.
const RoleAdmin = "admin"

// MaxTokenBytes bounds a bearer token; a longer one is refused before it is parsed.
const MaxTokenBytes = 8 << 10

// MaxSubjectBytes bounds a provider token's subject (the member table's column holds it).
const MaxSubjectBytes = 255

// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
const DefaultLeeway = 30 * time.Second

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
	// Issuer and Subject are the provider token's iss and sub; both empty for a secret token.
	Issuer  string
	Subject string
}

// Subjects maps a verified token's issuer and subject to the internal member id.
type Subjects interface {
	Member(ctx context.Context, issuer, subject string, issuedAt time.Time) (int64, error)
}

// Config configures a Verifier. At least one of Secret and Keys is set.
type Config struct {
	// Secret is the HS256 secret, at least MinSecretBytes; nil refuses HS256 tokens.
	Secret []byte
	// Keys verifies provider tokens; nil refuses them. With Keys, Issuer, Audience and Subjects
	// are required.
	Keys *KeySet
	// Issuer is the iss a provider token must carry, exactly.
	Issuer string
	// Audience must be one of a provider token's aud.
	Audience string
	// Subjects maps a provider token's subject to a member.
	Subjects Subjects
	// AdminClaim and AdminValue give the admin role to a provider token whose claim (a name,
	// or a dotted path into nested objects) is AdminValue or an array holding it, or, for a
	// claim named scope or scp, a space-separated string holding it. An empty AdminClaim makes
	// no provider token admin.
	AdminClaim string
	AdminValue string
	// Leeway is the clock skew allowed on exp, nbf and iat; 0 is DefaultLeeway.
	Leeway time.Duration
	// CacheItems > 0 remembers up to about that many verified tokens.
	CacheItems int
	// Metrics counts refusals; nil counts nothing.
	Metrics *Metrics
}

// Claims is the body of a secret-mode token.
type Claims struct {
	jwt.RegisteredClaims
	Role string `json:"role,omitempty"`
}

// Verifier checks bearer tokens.
type Verifier struct {
	cfg Config
	// secretParser takes only HS256; keysParser only the asymmetric algorithms, with iss and
	// aud required. Accepting the algorithm named by the token is the classic JWT hole.
	secretParser *jwt.Parser
	keysParser   *jwt.Parser
	// verified remembers tokens that passed, until they expire (at most cacheTTL): a player
	// sends the same token every 5 seconds, and decoding and checking it each time was a
	// quarter of the server's CPU at 20 000 requests/s. Nil when caching is off.
	verified *tokenCache
	// refused says whether a member's tokens are refused whatever they say (an erased member).
	// Set by Refuse before the verifier is used; nil refuses no one.
	refused func(member int64) bool
}

// KeyAlgorithms are the algorithms a provider token may use; the key's own alg, when it has
// one, must also match.
var KeyAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// Refuse makes v refuse every token whose member refused reports, in front of the cache: a
// token verified before its member was erased answers 401 from then on. Call it before v is
// used.
func (v *Verifier) Refuse(refused func(member int64) bool) { v.refused = refused }

// errRefused is the answer to a token of a member Refuse names.
var errRefused = apperr.Errorf(apperr.Unauthenticated, "this member is erased; sign in as another member")

type verified struct {
	id      Identity
	expires time.Time
	// kid, fp and withdrawals, for a provider token: its key id, that key's fingerprint and
	// the key set's count of withdrawals when it was verified (keyIDs.current).
	kid, fp     string
	withdrawals uint64
}

// cacheTTL bounds how long a verified token is trusted without checking it again. A provider
// token's entry goes sooner, at the key set's read that withdraws its key.
const cacheTTL = 10 * time.Minute

// NewVerifier returns a secret-mode Verifier for secret, which must be at least
// MinSecretBytes long. cacheItems > 0 remembers up to about that many verified tokens.
func NewVerifier(secret []byte, cacheItems int) (*Verifier, error) {
	return New(Config{Secret: secret, CacheItems: cacheItems})
}

// New returns a Verifier for cfg.
func New(cfg Config) (*Verifier, error) {
	if cfg.Secret == nil && cfg.Keys == nil {
		return nil, errors.New("a verifier needs a JWT secret or a key set")
	}
	if cfg.Secret != nil && len(cfg.Secret) < MinSecretBytes {
		return nil, fmt.Errorf("JWT secret is %d bytes, need at least %d", len(cfg.Secret), MinSecretBytes)
	}
	if cfg.Keys != nil && (cfg.Issuer == "" || cfg.Audience == "" || cfg.Subjects == nil) {
		return nil, errors.New("a key set needs an issuer, an audience and subjects")
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	v := &Verifier{
		cfg:          cfg,
		secretParser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired()),
		keysParser: jwt.NewParser(jwt.WithValidMethods(KeyAlgorithms), jwt.WithExpirationRequired(),
			jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience), jwt.WithIssuedAt(), jwt.WithLeeway(cfg.Leeway)),
	}
	if cfg.CacheItems > 0 {
		v.verified = newTokenCache(cfg.CacheItems)
	}
	return v, nil
}

// Verify parses a compact token and returns its identity, with a background context for the
// subject lookup. See VerifyContext.
func (v *Verifier) Verify(token string) (Identity, error) {
	return v.VerifyContext(context.Background(), token)
}

// VerifyContext parses a compact token and returns its identity. Every refusal is an
// apperr.Unauthenticated error; a subject lookup that could not reach its database is an
// apperr.Unavailable one (503: trying again can succeed).
func (v *Verifier) VerifyContext(ctx context.Context, token string) (Identity, error) {
	id, err := v.verify(ctx, token)
	if err == nil && v.refused != nil && v.refused(id.MemberID) {
		v.cfg.Metrics.refuse(reasonErased)
		return Identity{}, errRefused
	}
	return id, err
}

func (v *Verifier) verify(ctx context.Context, token string) (Identity, error) {
	if v.verified == nil {
		id, _, err := v.verifyWithExpiry(ctx, token)
		return id, err
	}
	now := time.Now()
	var kids *keyIDs
	if v.cfg.Keys != nil {
		kids = v.cfg.Keys.kids.Load()
	}
	if e, ok := v.verified.get(token, now); ok && (e.id.Issuer == "" || kids.current(e.withdrawals, e.kid, e.fp)) {
		return e.id, nil
	}
	id, exp, err := v.verifyWithExpiry(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	if ttl := min(exp.Sub(now), cacheTTL); ttl > 0 {
		e := verified{id: id, expires: now.Add(ttl)}
		if id.Issuer != "" && kids != nil {
			// The fingerprint from before the verification: install swaps the keys before it
			// stores their kids, so a newer key's token may get an older fingerprint (and is
			// verified once more after the next withdrawal), never the reverse.
			h, _ := tokenHeader(token)
			e.kid, e.fp = h.Kid, kids.kids[h.Kid]
			e.withdrawals = kids.withdrawals
		}
		v.verified.put(token, e, now)
	}
	return id, nil
}

// refusal is a refused token: its metric reason and its client message.
func (v *Verifier) refusal(reason, format string, args ...any) error {
	v.cfg.Metrics.refuse(reason)
	return apperr.Errorf(apperr.Unauthenticated, format, args...)
}

func (v *Verifier) verifyWithExpiry(ctx context.Context, token string) (Identity, time.Time, error) {
	if len(token) > MaxTokenBytes {
		return Identity{}, time.Time{}, v.refusal(reasonTooLong, "token longer than %d bytes", MaxTokenBytes)
	}
	h, ok := tokenHeader(token)
	alg := h.Alg
	switch {
	case !ok:
		return Identity{}, time.Time{}, v.refusal(reasonMalformed, "invalid token")
	case h.Crit:
		return Identity{}, time.Time{}, v.refusal(reasonMalformed, "token header names critical extensions (crit); none is supported")
	case alg == jwt.SigningMethodHS256.Alg() && v.cfg.Secret != nil:
		return v.verifySecret(token)
	case alg != jwt.SigningMethodHS256.Alg() && v.cfg.Keys != nil && isKeyAlgorithm(alg):
		return v.verifyKeys(ctx, token)
	default:
		return Identity{}, time.Time{}, v.refusal(reasonAlgorithm, "token algorithm %q is not accepted", truncate(alg, 16))
	}
}

func isKeyAlgorithm(alg string) bool {
	for _, a := range KeyAlgorithms {
		if a == alg {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// parseError turns a parser's error into a refusal.
func (v *Verifier) parseError(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return v.refusal(reasonIssuer, "token issuer is not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return v.refusal(reasonAudience, "token audience is not accepted")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return v.refusal(reasonMissingClaim, "token lacks a required claim (exp; iss and aud for a provider's token)")
	case errors.Is(err, jwt.ErrTokenExpired):
		return v.refusal(reasonExpired, "token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return v.refusal(reasonNotYetValid, "token not valid yet")
	case errors.Is(err, errNoKeys):
		return v.refusal(reasonNoKeys, "the identity provider's keys are not loaded yet; retry later")
	case errors.Is(err, errUnknownKey):
		return v.refusal(reasonUnknownKey, "token key id is unknown")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return v.refusal(reasonBadSignature, "token signature is invalid")
	default:
		return v.refusal(reasonMalformed, "invalid token")
	}
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
			v.cfg.Metrics.refuse(reasonMissing)
			return apperr.Errorf(apperr.Unauthenticated, "missing bearer token")
		}
		id, err := v.VerifyContext(c.UserContext(), token)
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
