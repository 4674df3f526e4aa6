package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
)

// secretPrefix marks a secret in the Standard Webhooks form: whsec_ then the key in base64.
const secretPrefix = "whsec_"

// secretBytes is the length of a generated key: the specification asks for 24 to 64 bytes.
const secretBytes = 32

// newSecret returns a fresh random signing key.
func newSecret() []byte {
	key := make([]byte, secretBytes)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return key
}

// FormatSecret writes key in the form receivers are given: whsec_<base64>.
func FormatSecret(key []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature header's value for a message: "v1," then the base64 of
// HMAC-SHA256, keyed with key, over "id.timestamp.body", as the Standard Webhooks specification
// says (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
func Sign(key []byte, id string, timestamp time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// setHeaders puts a message's Standard Webhooks headers on h.
func setHeaders(h http.Header, key []byte, id string, timestamp time.Time, body []byte) {
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(timestamp.Unix(), 10))
	h.Set("webhook-signature", Sign(key, id, timestamp, body))
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Playhead-Webhooks/1")
}
