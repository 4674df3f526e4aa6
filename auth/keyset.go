package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/backoff"
)

// The refresh schedule of a key set, stated here and in docs/operations/identity.md.
const (
	// MinKeysRefresh and MaxKeysRefresh clamp the lifetime a JWKS response's Cache-Control
	// max-age (or Expires) gives it: a provider saying "no-cache" is not fetched on every
	// request, and one saying "a week" still has a withdrawn key noticed within the hour.
	MinKeysRefresh = time.Minute
	MaxKeysRefresh = time.Hour
	// DefaultKeysRefresh is the lifetime of a response without cache headers (and the poll of
	// a file's modification time is FileKeysPoll).
	DefaultKeysRefresh = 5 * time.Minute
	// UnknownKeyRefetch is the least time between two fetches a token with an unknown kid
	// causes, shared by every request of the node: a flood of forged kids makes at most one
	// fetch per interval.
	UnknownKeyRefetch = 30 * time.Second
	// FileKeysPoll is how often a JWKS file's modification time and size are checked.
	FileKeysPoll = 2 * time.Second
	// fetchTimeout bounds one fetch of the discovery document or the JWKS.
	fetchTimeout = 10 * time.Second
	// maxJWKSBytes bounds a JWKS or discovery document read from the network or a file.
	maxJWKSBytes = 1 << 20
	// retryBase and retryLimit are the back-off of a failed fetch: a node started while its
	// provider is down keeps trying, ever more slowly, and refuses JWKS tokens meanwhile.
	retryBase  = time.Second
	retryLimit = time.Minute
)

// KeysConfig says where a KeySet reads its keys: exactly one of URL, Issuer (OIDC discovery)
// and File.
type KeysConfig struct {
	// URL is a JWKS URL.
	URL string
	// Issuer, when URL and File are empty, is discovered: Issuer + /.well-known/openid-configuration
	// names the jwks_uri, and the document's issuer must equal Issuer.
	Issuer string
	// File is a JWKS file, read again when its modification time or size changes.
	File string
	// Client fetches URLs; nil is a client with fetchTimeout.
	Client *http.Client
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics counts fetches; nil counts nothing.
	Metrics *Metrics
}

// KeySet holds the public keys of a JWKS and keeps them fresh: on the response's cache
// headers, on a token with an unknown kid (rate-limited), and after a failure (backing off).
// Keys already known keep verifying while the source is away.
type KeySet struct {
	cfg KeysConfig
	// current is the last JWKS read; nil until the first read succeeds. Written by fetch,
	// read by every request.
	current atomic.Pointer[keyfunc.Keyfunc]
	// lastOK is the UnixNano of the last successful read (0: none yet).
	lastOK atomic.Int64
	// keys is the number of keys in current.
	keys atomic.Int64
	// kids is the kids of current and the count of reads that withdrew one.
	kids atomic.Pointer[keyIDs]

	// mu serialises fetches; the fields below are guarded by it.
	mu          sync.Mutex
	jwksURL     string    // the discovered (or configured) JWKS URL
	lastUnknown time.Time // the last fetch an unknown kid caused
	fileStamp   string    // the modification time and size of the file last read

	// loaded is closed by the first successful read (under mu).
	loaded chan struct{}

	// cancel and done are set by Start and read by Stop.
	cancel context.CancelFunc
	done   chan struct{}
}

// NewKeySet returns a KeySet for cfg; Start reads the keys.
func NewKeySet(cfg KeysConfig) (*KeySet, error) {
	n := 0
	for _, s := range []string{cfg.URL, cfg.File} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("a key set reads a URL or a file, not both")
	}
	if n == 0 && cfg.Issuer == "" {
		return nil, errors.New("a key set needs a URL, a file or an issuer to discover")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: fetchTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	k := &KeySet{cfg: cfg, jwksURL: cfg.URL, loaded: make(chan struct{})}
	if cfg.Metrics != nil {
		cfg.Metrics.watch(k)
	}
	return k, nil
}

// Start makes a first read and launches the refresh loop. A failed first read is logged, not
// returned: the node starts, refuses JWKS tokens with 401 until a read succeeds, and retries
// with back-off.
func (k *KeySet) Start(ctx context.Context) error {
	ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	k.done = make(chan struct{})
	go k.run(ctx)
	return nil
}

// Stop ends the refresh loop and waits for it. It is idempotent.
func (k *KeySet) Stop(ctx context.Context) error {
	if k.cancel == nil {
		return nil
	}
	k.cancel()
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *KeySet) run(ctx context.Context) {
	defer close(k.done)
	failures := 0
	for {
		wait, err := k.refresh(ctx, "schedule")
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			k.cfg.Logger.Warn("reading the identity provider's keys failed; keys already read keep working", "error", err, "attempt", failures+1)
			wait = backoff.Ceiling(failures, retryBase, retryLimit)
			failures++
		} else {
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// refresh reads the keys once and returns how long they may be kept.
func (k *KeySet) refresh(ctx context.Context, trigger string) (time.Duration, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetchLocked(ctx, trigger)
}

func (k *KeySet) fetchLocked(ctx context.Context, trigger string) (time.Duration, error) {
	if k.cfg.File != "" {
		return FileKeysPoll, k.count(trigger, k.readFileLocked())
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	if k.jwksURL == "" {
		u, err := k.discover(ctx)
		if err != nil {
			return 0, k.count(trigger, err)
		}
		k.jwksURL = u
	}
	body, header, err := k.get(ctx, k.jwksURL)
	if err == nil {
		err = k.install(body)
	}
	return lifetime(header, time.Now()), k.count(trigger, err)
}

func (k *KeySet) count(trigger string, err error) error {
	if m := k.cfg.Metrics; m != nil {
		m.refreshes.WithLabelValues(trigger).Inc()
		if err != nil {
			m.refreshFailures.WithLabelValues(trigger).Inc()
		}
	}
	return err
}

// readFileLocked reads the file when its modification time or size changed since the last
// read: an operator replacing it (atomically, by rename) rotates the keys without a restart.
func (k *KeySet) readFileLocked() error {
	st, err := os.Stat(k.cfg.File)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	stamp := st.ModTime().String() + "/" + strconv.FormatInt(st.Size(), 10)
	if stamp == k.fileStamp && k.current.Load() != nil {
		k.lastOK.Store(time.Now().UnixNano())
		return nil
	}
	if st.Size() > maxJWKSBytes {
		return fmt.Errorf("JWKS file: %d bytes, the most is %d", st.Size(), maxJWKSBytes)
	}
	body, err := os.ReadFile(k.cfg.File)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	if err := k.install(body); err != nil {
		return fmt.Errorf("JWKS file %s: %w", k.cfg.File, err)
	}
	k.fileStamp = stamp
	return nil
}

// install replaces the keys with those of a JWKS document. A document without a usable key is
// refused, so a provider's broken response cannot withdraw every key at once.
func (k *KeySet) install(body []byte) error {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("JWKS is not JSON: %w", err)
	}
	// Only public signing keys: a private key published by mistake still verifies (keyfunc
	// takes its public half); an "oct" (HMAC) key is dropped so a JWKS can never supply an
	// HMAC secret, and an encryption key ("use": "enc", Keycloak publishes one beside its
	// signing key) never verifies a signature. Each key is read on its own: one this library
	// cannot read (a curve it lacks, such as Ed448, or a malformed key) is skipped and logged,
	// so it neither keeps a node from its first keys nor stops a rotation.
	store := jwkset.NewMemoryStorage()
	for _, key := range set.Keys {
		if key.KTY != jwkset.KtyRSA && key.KTY != jwkset.KtyEC && key.KTY != jwkset.KtyOKP ||
			key.USE != "" && key.USE != jwkset.UseSig {
			continue
		}
		jwk, err := jwkset.NewJWKFromMarshal(key, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		if err != nil {
			k.cfg.Logger.Warn("a key of the identity provider's JWKS is skipped", "kid", truncate(key.KID, 64), "error", err)
			continue
		}
		if err := store.KeyWrite(context.Background(), jwk); err != nil {
			return err
		}
	}
	all, err := store.KeyReadAll(context.Background())
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return errors.New("JWKS has no usable RSA, EC or OKP signing key")
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: store})
	if err != nil {
		return fmt.Errorf("JWKS: %w", err)
	}
	first := k.current.Swap(&kf) == nil
	// The kids after the keys: a request that saw the new withdrawal count verified with the
	// new keys, so no entry can carry that count and a withdrawn key.
	k.noteKeys(all)
	k.keys.Store(int64(len(all)))
	k.lastOK.Store(time.Now().UnixNano())
	if first {
		close(k.loaded)
	}
	return nil
}

// Loaded is closed once the keys are first read.
func (k *KeySet) Loaded() <-chan struct{} { return k.loaded }

type discovery struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// discover reads the issuer's OpenID configuration and returns its jwks_uri.
func (k *KeySet) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(k.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	body, _, err := k.get(ctx, u)
	if err != nil {
		return "", err
	}
	var d discovery
	if err := json.Unmarshal(body, &d); err != nil {
		return "", fmt.Errorf("discovery document %s: %w", u, err)
	}
	if d.Issuer != k.cfg.Issuer {
		return "", fmt.Errorf("discovery document %s names issuer %q, not %q", u, d.Issuer, k.cfg.Issuer)
	}
	if !strings.HasPrefix(d.JWKSURI, "https://") && !strings.HasPrefix(d.JWKSURI, "http://") {
		return "", fmt.Errorf("discovery document %s has no http(s) jwks_uri", u)
	}
	// An https issuer's keys come over https too: an http jwks_uri could be answered by
	// anyone on the path.
	if strings.HasPrefix(k.cfg.Issuer, "https://") && !strings.HasPrefix(d.JWKSURI, "https://") {
		return "", fmt.Errorf("discovery document %s names jwks_uri %q, not https like the issuer", u, d.JWKSURI)
	}
	return d.JWKSURI, nil
}

func (k *KeySet) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.cfg.Client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	// Redirects are followed (a provider may move its keys), but not from https to http: a
	// downgraded answer could come from anyone on the path and would supply the keys.
	if req.URL.Scheme == "https" && resp.Request.URL.Scheme != "https" {
		return nil, nil, fmt.Errorf("GET %s: redirected to %s, which is not https", u, resp.Request.URL.Redacted())
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, nil, fmt.Errorf("GET %s: more than %d bytes", u, maxJWKSBytes)
	}
	return body, resp.Header, nil
}

// lifetime is how long a JWKS response may be kept: its Cache-Control max-age, else its
// Expires, else DefaultKeysRefresh, clamped to [MinKeysRefresh, MaxKeysRefresh].
func lifetime(h http.Header, now time.Time) time.Duration {
	d := DefaultKeysRefresh
	found := false
	for _, directive := range strings.Split(h.Get("Cache-Control"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(strings.ToLower(directive)), "max-age="); ok {
			if s, err := strconv.Atoi(v); err == nil {
				d, found = time.Duration(s)*time.Second, true
			}
		}
	}
	if !found {
		if t, err := http.ParseTime(h.Get("Expires")); err == nil {
			d = t.Sub(now)
		}
	}
	return min(max(d, MinKeysRefresh), MaxKeysRefresh)
}

// errNoKeys refuses a JWKS token before the first read of the keys succeeded.
var errNoKeys = errors.New("the identity provider's keys are not loaded yet")

// errUnknownKey refuses a token whose kid is in no key read.
var errUnknownKey = errors.New("unknown key id")

// keyfunc finds the key of a token: by its kid (or, without a kid, every key of a matching
// alg). An unknown kid reads the keys again, at most once per UnknownKeyRefetch for the whole
// node. The token's jku, x5u, jwk and x5c headers are never looked at.
func (k *KeySet) keyfunc(token *jwt.Token) (any, error) {
	kf := k.current.Load()
	if kf == nil {
		if !k.refetchUnknown() {
			return nil, errNoKeys
		}
		if kf = k.current.Load(); kf == nil {
			return nil, errNoKeys
		}
	}
	key, err := (*kf).Keyfunc(token)
	if err == nil || !errors.Is(err, jwkset.ErrKeyNotFound) {
		return key, err
	}
	if !k.refetchUnknown() {
		return nil, errUnknownKey
	}
	key, err = (*k.current.Load()).Keyfunc(token)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		return nil, errUnknownKey
	}
	return key, err
}

// refetchUnknown reads the keys again if no unknown kid did in the last UnknownKeyRefetch,
// and reports whether the keys may have changed (a read happened, here or in a request this
// one waited for).
func (k *KeySet) refetchUnknown() bool {
	before := k.lastOK.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastOK.Load() != before {
		return true // another request read them while this one waited
	}
	now := time.Now()
	if !k.lastUnknown.IsZero() && now.Sub(k.lastUnknown) < UnknownKeyRefetch {
		return false
	}
	k.lastUnknown = now
	_, err := k.fetchLocked(context.Background(), "unknown_kid")
	if err != nil {
		k.cfg.Logger.Warn("reading the identity provider's keys for an unknown key id failed", "error", err)
		return false
	}
	return true
}

// Keys reports how many keys the set holds.
func (k *KeySet) Keys() int { return int(k.keys.Load()) }
