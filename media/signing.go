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

// The query parameters of a signed object URL, all three required, each exactly once.
const (
	paramMember  = "member"
	paramExpires = "expires"
	paramSig     = "sig"
)

// Signer signs and checks Playhead's own object URLs:
//
//	/objects/hls/42/<claim>/v0/index.m3u8?member=7&expires=1767225600&sig=<HMAC-SHA256>
//
// The signature covers the member it was issued to, the expiry and the object's storage key,
// so a URL opens that one object until it expires, and only while that member may play the
// media (the object server checks access again on every request). Changing any part of the
// URL — another file, another media, another member, a later expiry — breaks the signature.
type Signer struct {
	key []byte // never logged; String hides it
}

// SigningSecretFrom derives a URL signing secret from the JWT secret (HMAC with a fixed
// label), so that a deployment needs no second secret while a token's signature is never a
// URL's: the two keys differ, and one cannot be computed from the other's signatures.
func SigningSecretFrom(jwtSecret []byte) []byte {
	h := hmac.New(sha256.New, jwtSecret)
	h.Write([]byte("playhead object URL signing key v1"))
	return h.Sum(nil)
}

// NewSigner returns a Signer with secret, which must be at least MinSigningSecretBytes long
// and the same on every node that serves objects.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSigningSecretBytes {
		return nil, fmt.Errorf("media: the URL signing secret must be at least %d bytes", MinSigningSecretBytes)
	}
	return &Signer{key: bytes.Clone(secret)}, nil
}

// String keeps the secret out of any log or error that prints a Signer.
func (s *Signer) String() string { return "media.Signer{…}" }

func (s *Signer) mac(member int64, key string, expires int64) []byte {
	h := hmac.New(sha256.New, s.key)
	// Versioned and newline-separated: a key cannot contain a newline (the object server
	// refuses control characters), so no two different inputs give the same message.
	fmt.Fprintf(h, "playhead object URL v1\n%d\n%d\n%s", member, expires, key)
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
		"&" + paramSig + "=" + base64.RawURLEncoding.EncodeToString(s.mac(member, key, exp))
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
// URL was issued to. Anything but exactly the three parameters, each once, in their canonical
// form, is refused: the query is never decoded or normalised, so two spellings of one URL
// cannot pass different checks.
func (s *Signer) Verify(key string, rawQuery string, now time.Time) (member int64, err error) {
	var memberRaw, expiresRaw, sigRaw string
	seen := 0
	for part := range strings.SplitSeq(rawQuery, "&") {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return 0, errBadLink
		}
		var dst *string
		switch name {
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
	if seen != 3 {
		return 0, errBadLink
	}
	member, okMember := canonicalPositive(memberRaw)
	expires, okExpires := canonicalPositive(expiresRaw)
	if !okMember || !okExpires || len(sigRaw) != sigLen {
		return 0, errBadLink
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sigRaw)
	if err != nil || !hmac.Equal(sig, s.mac(member, key, expires)) {
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
