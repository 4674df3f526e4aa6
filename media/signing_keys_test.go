package media_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/media"
)

var (
	oldKey = media.SigningKey{ID: "2026-11", Secret: []byte("old-url-key-old-url-key-old-url-key-0")}
	newKey = media.SigningKey{ID: "2026-12", Secret: []byte("new-url-key-new-url-key-new-url-key-0")}
	legacy = media.SigningKey{Secret: []byte(secret)}
)

func keyedSigner(t *testing.T, keys ...media.SigningKey) *media.Signer {
	t.Helper()
	return must(media.NewKeyedSigner(keys))(t)
}

// queryOf is the raw query of a signed URL.
func queryOf(url string) string {
	_, q, _ := strings.Cut(url, "?")
	return q
}

// TestSigner_Rotation, the rotation in its three steps: a link signed with the old key keeps
// verifying while both keys are configured (the new one signing) until its own expiry, and is
// refused once the old key is removed; links of the new key verify at every step after it is
// added, and carry its id.
func TestSigner_Rotation(t *testing.T) {
	const object = "hls/7/tok/v0/seg_000.ts"
	now := time.Unix(1_800_000_000, 0)
	expires := now.Add(10 * time.Minute)

	before := keyedSigner(t, oldKey)         // the old key signs
	during := keyedSigner(t, newKey, oldKey) // the new key signs, the old one verifies
	after := keyedSigner(t, newKey)          // the old key is gone
	oldLink := queryOf(before.URL(7, object, expires))
	if !strings.HasPrefix(oldLink, "kid=2026-11&") {
		t.Fatalf("a link of key 2026-11: %s, want it to start with kid=2026-11", oldLink)
	}
	for _, s := range []*media.Signer{before, during} {
		if member, err := s.Verify(object, oldLink, expires.Add(-time.Second)); err != nil || member != 7 {
			t.Errorf("the old key's link a second before its expiry: member %d, %v; want 7", member, err)
		}
	}
	if _, err := during.Verify(object, oldLink, expires); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("the old key's link at its expiry: %v, want expired", err)
	}
	if _, err := after.Verify(object, oldLink, now); err == nil || strings.Contains(err.Error(), "expired") {
		t.Errorf("the old key's link once the key is removed: %v, want refused as not valid", err)
	}

	newLink := queryOf(during.URL(7, object, expires))
	if !strings.HasPrefix(newLink, "kid=2026-12&") {
		t.Fatalf("a link of the rotated signer: %s, want it signed by 2026-12", newLink)
	}
	for name, s := range map[string]*media.Signer{"during": during, "after": after, "new key only verifying": keyedSigner(t, oldKey, newKey)} {
		if member, err := s.Verify(object, newLink, now); err != nil || member != 7 {
			t.Errorf("%s: the new key's link: member %d, %v; want 7", name, member, err)
		}
	}
	if _, err := before.Verify(object, newLink, now); err == nil {
		t.Error("a node that does not know the new key accepts its link")
	}
}

// TestSigner_LegacyLinks: the legacy key (PLAYHEAD_URL_SIGNING_SECRET) signs links without a
// kid, byte for byte the format of NewSigner, and such links verify only while the legacy key
// is configured; a kid link never verifies with the legacy key's secret under another name, nor
// under another kid of the same secret.
func TestSigner_LegacyLinks(t *testing.T) {
	const object = "hls/7/tok/master.m3u8"
	now := time.Unix(1_800_000_000, 0)
	expires := now.Add(time.Minute)
	plain := must(media.NewSigner([]byte(secret)))(t)
	legacyLink := queryOf(plain.URL(7, object, expires))
	if strings.Contains(legacyLink, "kid=") {
		t.Fatalf("a legacy link carries a kid: %s", legacyLink)
	}
	if got := queryOf(keyedSigner(t, legacy, newKey).URL(7, object, expires)); got != legacyLink {
		t.Errorf("the legacy key signing among keys: %s, want the legacy format %s", got, legacyLink)
	}
	if _, err := keyedSigner(t, newKey, legacy).Verify(object, legacyLink, now); err != nil {
		t.Errorf("a legacy link while the legacy key still verifies: %v", err)
	}
	if _, err := keyedSigner(t, newKey).Verify(object, legacyLink, now); err == nil {
		t.Error("a legacy link accepted by a node without the legacy key")
	}
	// The same secret under an id: its links are not legacy links, nor the other way round.
	named := keyedSigner(t, media.SigningKey{ID: "same", Secret: []byte(secret)})
	if _, err := named.Verify(object, legacyLink, now); err == nil {
		t.Error("a legacy link accepted by a key with an id")
	}
	if _, err := plain.Verify(object, strings.TrimPrefix(queryOf(named.URL(7, object, expires)), "kid=same&"), now); err == nil {
		t.Error("a kid link with its kid removed accepted by the legacy key of the same secret")
	}
	// Two ids of one secret: the kid is signed, so a link does not move from one to the other.
	twins := keyedSigner(t, media.SigningKey{ID: "same", Secret: []byte(secret)}, media.SigningKey{ID: "twin", Secret: []byte(secret)})
	if _, err := twins.Verify(object, strings.Replace(queryOf(named.URL(7, object, expires)), "kid=same&", "kid=twin&", 1), now); err == nil {
		t.Error("a link of key same accepted under kid twin, a key of the same secret")
	}
}

// TestSigner_HostileKeyIDs: a kid that is unknown, odd, empty, repeated, encoded or moved to
// another valid link is refused with exactly the answer of a bad signature, so the answer
// tells nothing of which keys a node holds.
func TestSigner_HostileKeyIDs(t *testing.T) {
	const object = "hls/7/tok/v0/seg_000.ts"
	now := time.Unix(1_800_000_000, 0)
	s := keyedSigner(t, newKey, oldKey)
	good := queryOf(s.URL(7, object, now.Add(time.Minute)))
	rest := strings.TrimPrefix(good, "kid=2026-12&")
	_, badSig := s.Verify(object, strings.Replace(good, "sig=", "sig=A", 1)[:len(good)], now)
	if badSig == nil {
		t.Fatal("a changed signature verifies")
	}
	for name, q := range map[string]string{
		"unknown kid":           "kid=2027-01&" + rest,
		"the other key's kid":   "kid=2026-11&" + rest,
		"no kid":                rest,
		"empty kid":             "kid=&" + rest,
		"kid twice":             "kid=2026-12&" + good,
		"kid percent-encoded":   "kid=2026%2D12&" + rest,
		"kid with a path":       "kid=../../etc/passwd&" + rest,
		"kid with SQL":          "kid=x'%20OR%201=1--&" + rest,
		"kid with a NUL":        "kid=2026-12%00&" + rest,
		"kid of 10 KiB":         "kid=" + strings.Repeat("k", 10<<10) + "&" + rest,
		"kid in capitals":       "KID=2026-12&" + rest,
		"kid after a newline":   "kid=2026-12%0A&" + rest,
		"kid without its value": "kid&" + rest,
	} {
		_, err := s.Verify(object, q, now)
		if err == nil || err.Error() != badSig.Error() {
			t.Errorf("%s: %v, want the bad signature's answer %q", name, err, badSig)
		}
	}
	if member, err := s.Verify(object, rest+"&kid=2026-12", now); err != nil || member != 7 {
		t.Errorf("kid last: member %d, %v; the parameters' order is free", member, err)
	}
}

// TestSigner_UnknownKeyIDHasNoKey: a kid the node does not hold gives no key at all to check
// the signature with, not an empty one: links forged with an empty secret (and with every
// configured secret under that kid) are refused, with the bad signature's answer.
func TestSigner_UnknownKeyIDHasNoKey(t *testing.T) {
	const object = "hls/7/tok/v0/seg_000.ts"
	now := time.Unix(1_800_000_000, 0)
	s := keyedSigner(t, newKey, legacy)
	exp := now.Add(time.Minute).Unix()
	_, badSig := s.Verify(object, strings.Replace(queryOf(s.URL(7, object, now.Add(time.Minute))), "sig=", "sig=A", 1), now)
	forge := func(secret []byte, message string) string {
		h := hmac.New(sha256.New, secret)
		h.Write([]byte(message))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	for _, kid := range []string{"zzz", "2027-01"} {
		for name, secret := range map[string][]byte{"an empty secret": nil, "the signing key's secret": newKey.Secret, "the legacy secret": legacy.Secret} {
			for _, message := range []string{
				fmt.Sprintf("playhead object URL v1\n7\n%d\n%s", exp, object),
				fmt.Sprintf("playhead object URL v2\n%s\n7\n%d\n%s", kid, exp, object),
			} {
				q := fmt.Sprintf("kid=%s&member=7&expires=%d&sig=%s", kid, exp, forge(secret, message))
				if _, err := s.Verify(object, q, now); err == nil || err.Error() != badSig.Error() {
					t.Errorf("kid %s signed with %s (%q): %v, want the bad signature's answer %q", kid, name, message[:22], err, badSig)
				}
			}
		}
	}
}

// TestNewKeyedSigner_Refuses keys that could not be told apart or written in a link.
func TestNewKeyedSigner_Refuses(t *testing.T) {
	long := bytes.Repeat([]byte("s"), media.MinSigningSecretBytes)
	for name, keys := range map[string][]media.SigningKey{
		"no key":               nil,
		"short secret":         {{ID: "a", Secret: long[1:]}},
		"id twice":             {{ID: "a", Secret: long}, {ID: "a", Secret: bytes.ToUpper(long)}},
		"legacy twice":         {{Secret: long}, {Secret: bytes.ToUpper(long)}},
		"id with a dot":        {{ID: "a.b", Secret: long}},
		"id with a colon":      {{ID: "a:b", Secret: long}},
		"id with a space":      {{ID: "a b", Secret: long}},
		"id with a non-ASCII":  {{ID: "clé", Secret: long}},
		"id too long":          {{ID: strings.Repeat("k", media.MaxSigningKeyIDLen+1), Secret: long}},
		"second key too short": {{ID: "a", Secret: long}, {ID: "b", Secret: []byte("short")}},
	} {
		if _, err := media.NewKeyedSigner(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := media.NewKeyedSigner([]media.SigningKey{{ID: strings.Repeat("k", media.MaxSigningKeyIDLen), Secret: long}, {ID: "A-z_9", Secret: long}}); err != nil {
		t.Errorf("valid ids refused: %v", err)
	}
}

// TestObjects_SigningKeyRotation, over HTTP: a node restarted with a new signing key and the
// old one still configured plays a playlist link given out before the restart, and the
// playlist it serves signs its segments with the new key; a node without the old key refuses
// the old link with the same 403 as a forged one.
func TestObjects_SigningKeyRotation(t *testing.T) {
	f := setupObjects(t)
	key := fmt.Sprintf("hls/%d/tok/v0/index.m3u8", f.mine)
	before := &media.Links{Signer: keyedSigner(t, oldKey), TTL: time.Minute}
	link := before.Playlist(1, key, 0)

	during := f.serve(&media.Links{Signer: keyedSigner(t, newKey, oldKey), TTL: time.Minute})
	status, _, body := rawGet(t, during, link, nil)
	if status != http.StatusOK {
		t.Fatalf("the old key's playlist link on the rotated node: %d %s", status, body)
	}
	if !strings.Contains(string(body), "seg_000.ts?kid=2026-12&") {
		t.Errorf("the rotated node's playlist does not sign its segments with the new key:\n%s", body)
	}

	after := f.serve(&media.Links{Signer: keyedSigner(t, newKey), TTL: time.Minute})
	forged := strings.Replace(link, "kid=2026-11", "kid=2026-10", 1)
	_, _, forgedBody := rawGet(t, after, forged, nil)
	if status, _, body := rawGet(t, after, link, nil); status != http.StatusForbidden || !bytes.Equal(body, forgedBody) {
		t.Errorf("the old key's link once the key is removed: %d %s, want 403 %s", status, body, forgedBody)
	}
}
