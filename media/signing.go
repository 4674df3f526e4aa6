package media

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/storage"
)

// MinSigningSecretBytes is the shortest secret a Signer takes: as long as an HMAC-SHA256 key
// should be.
const MinSigningSecretBytes = 32

// The query parameters of a signed object URL, each at most once: kid names the key (absent
// on a link of the legacy key), the other three are required.
const (
	paramKeyID   = "kid"
	paramMember  = "member"
	paramExpires = "expires"
	paramSig     = "sig"
)

// MaxSigningKeyIDLen is the longest key id: it is in every link, so it stays short.
const MaxSigningKeyIDLen = 32

// Signer signs and checks Playhead's own object URLs:
//
//	/objects/hls/42/<claim>/v0/index.m3u8?kid=2026-12&member=7&expires=1767225600&sig=<HMAC-SHA256>
//
// The signature covers the key id, the member it was issued to, the expiry and the object's
// storage key, so a URL opens that one object until it expires, and only while that member may
// play the media (the object server checks access again on every request). Changing any part
// of the URL — another file, another media, another member, a later expiry, another key id —
// breaks the signature.
//
// A Signer holds one or more keys: the first signs, every one verifies, so that during a
// rotation the links signed with the previous key keep working until they expire. The legacy
// key (ID "") signs links without a kid, the format every node wrote before keys had ids, so a
// cluster that still runs such nodes keeps accepting the links of the upgraded ones.
type Signer struct {
	sign SigningKey            // the first key: signs every new link
	byID map[string]SigningKey // every key, by ID ("" for the legacy key)
}

// SigningKey is one key of a Signer. Secret is never logged (a Signer's String hides it).
type SigningKey struct {
	// ID is the key's name in the links it signs: 1 to MaxSigningKeyIDLen characters of
	// [A-Za-z0-9_-], or "" for the legacy key, whose links carry no kid.
	ID string
	// Secret is the HMAC key, at least MinSigningSecretBytes long.
	Secret []byte
}

// SigningSecretFrom derives a URL signing secret from the JWT secret (HMAC with a fixed
// label), so that a deployment needs no second secret while a token's signature is never a
// URL's: the two keys differ, and one cannot be computed from the other's signatures.
func SigningSecretFrom(jwtSecret []byte) []byte {
	h := hmac.New(sha256.New, jwtSecret)
	h.Write([]byte("playhead object URL signing key v1"))
	return h.Sum(nil)
}

// NewSigner returns a Signer with the legacy key secret alone, which must be at least
// MinSigningSecretBytes long and the same on every node that serves objects.
func NewSigner(secret []byte) (*Signer, error) {
	return NewKeyedSigner([]SigningKey{{Secret: secret}})
}

// NewKeyedSigner returns a Signer that signs with keys[0] and verifies with any of keys. IDs
// must be valid (ValidSigningKeyID, or "" for the legacy key) and distinct; every node that
// serves objects must know every key a node signs with.
func NewKeyedSigner(keys []SigningKey) (*Signer, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("media: a URL signer needs at least one key")
	}
	s := &Signer{byID: make(map[string]SigningKey, len(keys))}
	for i, k := range keys {
		if k.ID != "" && !ValidSigningKeyID(k.ID) {
			return nil, fmt.Errorf("media: URL signing key id %q: want 1 to %d characters of A-Z, a-z, 0-9, _ and -", k.ID, MaxSigningKeyIDLen)
		}
		if _, dup := s.byID[k.ID]; dup {
			return nil, fmt.Errorf("media: URL signing key id %q: given twice", k.ID)
		}
		if len(k.Secret) < MinSigningSecretBytes {
			return nil, fmt.Errorf("media: the URL signing secret of key %q must be at least %d bytes", k.ID, MinSigningSecretBytes)
		}
		k.Secret = bytes.Clone(k.Secret)
		s.byID[k.ID] = k
		if i == 0 {
			s.sign = k
		}
	}
	return s, nil
}

// ValidSigningKeyID reports whether id may name a URL signing key: 1 to MaxSigningKeyIDLen
// characters of [A-Za-z0-9_-], which need no escaping in a query.
func ValidSigningKeyID(id string) bool {
	if id == "" || len(id) > MaxSigningKeyIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// String keeps the secrets out of any log or error that prints a Signer.
func (s *Signer) String() string { return "media.Signer{…}" }

func mac(k SigningKey, member int64, key string, expires int64) []byte {
	h := hmac.New(sha256.New, k.Secret)
	// Versioned and newline-separated: neither a key id nor a storage key can contain a
	// newline (the object server refuses control characters), so no two different inputs give
	// the same message. The legacy key keeps v1, the message of every link it signed.
	if k.ID == "" {
		fmt.Fprintf(h, "playhead object URL v1\n%d\n%d\n%s", member, expires, key)
	} else {
		fmt.Fprintf(h, "playhead object URL v2\n%s\n%d\n%d\n%s", k.ID, member, expires, key)
	}
	return h.Sum(nil)
}

// URL returns the signed path and query of the object at key for member, valid until expires
// (to the second, rounded up).
func (s *Signer) URL(member int64, key string, expires time.Time) string {
	exp := expires.Unix()
	if expires.Nanosecond() > 0 {
		exp++
	}
	q := paramMember + "=" + strconv.FormatInt(member, 10) + "&" + paramExpires + "=" + strconv.FormatInt(exp, 10) +
		"&" + paramSig + "=" + base64.RawURLEncoding.EncodeToString(mac(s.sign, member, key, exp))
	if s.sign.ID != "" {
		q = paramKeyID + "=" + s.sign.ID + "&" + q
	}
	return ObjectPath(key) + "?" + q
}

// ObjectPath is the path under which Playhead serves the object at key: "/objects/" and the
// key with each segment escaped.
func ObjectPath(key string) string {
	segments := strings.Split(key, "/")
	for i, seg := range segments {
		segments[i] = url.PathEscape(seg)
	}
	return "/objects/" + strings.Join(segments, "/")
}

// sigLen is the length of an encoded signature: 32 bytes in unpadded base64url.
var sigLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// errBadLink is the answer to any URL whose signature does not check out: which part failed
// is not the client's business.
var errBadLink = apperr.Errorf(apperr.Forbidden, "this link is not valid: ask GET /v1/media/{id} for a new one")

// Verify checks the raw query of a request for the object at key and returns the member the
// URL was issued to. Anything but exactly the three parameters and an optional kid, each once,
// in their canonical form, is refused: the query is never decoded or normalised, so two
// spellings of one URL cannot pass different checks. A kid this Signer does not hold, and a
// link without one while it holds no legacy key, get the answer of a bad signature: which keys
// a node holds is not the client's business either.
func (s *Signer) Verify(key string, rawQuery string, now time.Time) (member int64, err error) {
	var kidRaw, memberRaw, expiresRaw, sigRaw string
	seen := 0
	for part := range strings.SplitSeq(rawQuery, "&") {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return 0, errBadLink
		}
		var dst *string
		switch name {
		case paramKeyID:
			dst = &kidRaw
		case paramMember:
			dst = &memberRaw
		case paramExpires:
			dst = &expiresRaw
		case paramSig:
			dst = &sigRaw
		default:
			return 0, errBadLink
		}
		if *dst != "" || value == "" {
			return 0, errBadLink
		}
		*dst = value
		seen++
	}
	required := 3
	if kidRaw != "" {
		required = 4
	}
	if seen != required {
		return 0, errBadLink
	}
	k, okKey := s.byID[kidRaw]
	member, okMember := canonicalPositive(memberRaw)
	expires, okExpires := canonicalPositive(expiresRaw)
	if !okKey || !okMember || !okExpires || len(sigRaw) != sigLen {
		return 0, errBadLink
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sigRaw)
	if err != nil || !hmac.Equal(sig, mac(k, member, key, expires)) {
		return 0, errBadLink
	}
	// Checked after the signature, so that an expiry is only reported for a real link.
	if now.Unix() >= expires {
		return 0, apperr.Errorf(apperr.Forbidden, "this link has expired: ask GET /v1/media/{id} for a new one")
	}
	return member, nil
}

// canonicalPositive parses a positive decimal integer written without sign, leading zeros or
// anything else.
func canonicalPositive(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// Links makes the URLs a member's player fetches encoded files with. Playlists are always
// Playhead's own (signed by Signer), because they are rewritten for the member on every
// request; segments and thumbnails are presigned on the object store when it can (Direct), so
// that their bytes never pass through Playhead, and Playhead's own otherwise (local storage).
//
// A link stays valid for TTL beyond the moment its file is needed: a playlist for TTL plus the
// media's duration (a player may load a variant playlist first when it switches quality late
// in the video), a segment for TTL plus its start time in the video (a player that reads the
// playlist at the start fetches the last segment about that much later). A player that pauses
// longer than TTL asks for a new playlist URL (the player page does, on a 403).
type Links struct {
	Signer *Signer
	// Direct presigns segment and thumbnail URLs on the object store; nil: Playhead serves them.
	Direct storage.Presigner
	// TTL is the validity beyond the playback distance. Required.
	TTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (l *Links) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Playlist returns the signed Playhead URL of the playlist at key, for a media item of the
// given duration.
func (l *Links) Playlist(member int64, key string, duration time.Duration) string {
	return l.Signer.URL(member, key, l.now().Add(l.TTL+max(duration, 0)))
}

// File returns the URL of the segment or thumbnail at key, which is needed at offset into the
// video (0 for a thumbnail).
func (l *Links) File(ctx context.Context, member int64, key string, offset time.Duration) (string, error) {
	validFor := l.TTL + max(offset, 0)
	if path.Ext(key) == ".m3u8" || l.Direct == nil {
		return l.Signer.URL(member, key, l.now().Add(validFor)), nil
	}
	// SigV4 presigned URLs live at most 7 days.
	return l.Direct.PresignGet(ctx, key, min(validFor, maxPresignTTL))
}

// maxPresignTTL is the longest validity S3 accepts for a presigned URL.
const maxPresignTTL = 7 * 24 * time.Hour
