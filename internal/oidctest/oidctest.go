// Package oidctest gives tests a real OpenID Provider: the example server of zitadel/oidc (an
// OpenID-certified library), built once per machine by `make deps` (scripts/oidc-provider.sh)
// and started per test on a loopback port of its own. When the binary is missing the test fails
// with a message saying to run `make deps`: it never skips.
//
// The provider signs RS256 ID tokens with a key it makes at each start, publishes it at /keys
// (discovery at /.well-known/openid-configuration) and names its issuer
// http://localhost:PORT/. Its access tokens are opaque, so Playhead is configured with the
// ID token's audience, the public client "native", and accepts the ID token as the bearer.
package oidctest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/toolcache"
)

// Version is the zitadel/oidc module version scripts/oidc-provider.sh builds.
const Version = "v3.52.0"

// EnvProvider names a variable that points at a provider binary to use instead of the cached
// build.
const EnvProvider = "PLAYHEAD_TEST_OIDC_PROVIDER"

// ClientID is the provider's public client: PKCE, no secret, the audience of its ID tokens.
const ClientID = "native"

// startTimeout bounds how long Start waits for the provider's discovery document.
const startTimeout = 30 * time.Second

// User is a member of the provider. ID is the subject of its tokens: any string.
type User struct {
	ID, Username, Password string
}

// Options configure a provider.
type Options struct {
	Users []User
	// RedirectURIs are where the client "native" may be sent back to after a sign-in.
	RedirectURIs []string
}

// Provider is a running provider.
type Provider struct {
	// Issuer is http://localhost:PORT/, exactly as the tokens' iss says it.
	Issuer string
	// ClientID is the public client the tests sign in with (ClientID).
	ClientID string
	// JWKSURL is where the provider publishes its signing key.
	JWKSURL string

	t       testing.TB
	port    int
	dir     string
	users   string
	opts    Options
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logs    []string // the log files of every start, oldest first
	stopped bool
}

// Path returns the provider binary the tests use: $PLAYHEAD_TEST_OIDC_PROVIDER, or the build
// of `make deps` in the per-machine cache.
func Path() string {
	if p := os.Getenv(EnvProvider); p != "" {
		return p
	}
	return filepath.Join(toolcache.Dir(), "oidc-op-"+Version, "server")
}

// Start starts a provider with opts's users on a free loopback port; the test's cleanup stops it.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	bin := Path()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("oidctest: no OpenID Provider at %s: run make deps (scripts/oidc-provider.sh builds it)", bin)
	}
	users := make(map[string]map[string]any, len(opts.Users))
	for _, u := range opts.Users {
		// The provider finds a user by the map's key, so it must be the user's ID.
		users[u.ID] = map[string]any{"ID": u.ID, "Username": u.Username, "Password": u.Password,
			"FirstName": "Test", "LastName": u.Username, "Email": u.Username + "@example.com",
			"EmailVerified": true, "PreferredLanguage": "en"}
	}
	body, err := json.Marshal(users)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &Provider{t: t, dir: dir, users: filepath.Join(dir, "users.json"), opts: opts, ClientID: ClientID}
	if err := os.WriteFile(p.users, body, 0o600); err != nil {
		t.Fatal(err)
	}
	p.port = freePort(t)
	p.Issuer = fmt.Sprintf("http://localhost:%d/", p.port)
	p.JWKSURL = p.Issuer + "keys"
	t.Cleanup(p.Stop)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePort returns a loopback port nothing listens on now. The provider listens on it moments
// later; a clash with another process in between fails its start, and the test says so.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (p *Provider) start() error {
	log := filepath.Join(p.dir, fmt.Sprintf("provider-%d.log", len(p.logs)+1))
	logFile, err := os.Create(log)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(Path())
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(p.port), "USERS_FILE="+p.users,
		"REDIRECT_URI="+strings.Join(p.opts.RedirectURIs, ","))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGKILL when the thread that started it ends: the start runs on a locked goroutine that
	// then waits for the process, so the provider lives until Stop or the test binary's exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("oidctest: start %s: %w", Path(), err)
	}
	p.mu.Lock()
	p.cmd, p.exited, p.logs, p.stopped = cmd, exited, append(p.logs, log), false
	p.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			out, _ := os.ReadFile(log)
			return fmt.Errorf("oidctest: the provider exited at start-up:\n%s", out)
		default:
		}
		resp, err := http.Get(p.Issuer + ".well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("oidctest: the provider's discovery did not answer within %s (last: %v)", startTimeout, err)
		}
		// Not a bound on the provider's speed: the loop waits for its discovery document.
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the provider and waits for its exit. Tokens it issued stay valid for a verifier
// that has its key; its JWKS and discovery are unreachable until Restart.
func (p *Provider) Stop() {
	p.mu.Lock()
	cmd, exited, stopped := p.cmd, p.exited, p.stopped
	p.stopped = true
	p.mu.Unlock()
	if cmd == nil || stopped {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Restart stops the provider and starts it again on the same port with the same users: it signs
// with a new key from then on (the old key is gone from its JWKS), as a provider whose key
// rotated without an overlap.
func (p *Provider) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
}

// requestLine matches the provider's log line for one HTTP request (slog's text format).
var requestLine = regexp.MustCompile(`msg="http request" .*\bpath=(\S+)`)

// Requests counts the requests for path (such as "/keys") the provider has received, over
// every start.
func (p *Provider) Requests(path string) int {
	p.mu.Lock()
	logs := append([]string(nil), p.logs...)
	p.mu.Unlock()
	n := 0
	for _, log := range logs {
		out, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		for _, m := range requestLine.FindAllStringSubmatch(string(out), -1) {
			if m[1] == path {
				n++
			}
		}
	}
	return n
}

// SignIn runs the authorization code flow with PKCE as a browser would (the provider's login
// form, posted), and returns the ID token. The first of Options.RedirectURIs is the redirect;
// nothing needs to listen there: the code is read from the redirect's Location.
func (p *Provider) SignIn(t testing.TB, username, password string) string {
	t.Helper()
	tok, err := p.signIn(username, password)
	if err != nil {
		t.Fatalf("oidctest: sign-in as %s: %v", username, err)
	}
	return tok
}

func (p *Provider) signIn(username, password string) (string, error) {
	if len(p.opts.RedirectURIs) == 0 {
		return "", fmt.Errorf("Options.RedirectURIs is empty")
	}
	redirect := p.opts.RedirectURIs[0]
	verifier := randomString()
	challenge := sha256.Sum256([]byte(verifier))
	state := randomString()
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	q := url.Values{
		"client_id": {p.ClientID}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid profile"}, "state": {state}, "nonce": {randomString()},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
	}
	login, err := location(client.Get(p.Issuer + "auth?" + q.Encode()))
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	loginURL, err := url.Parse(login)
	if err != nil {
		return "", err
	}
	id := loginURL.Query().Get("authRequestID")
	callback, err := location(client.PostForm(p.Issuer+"login/username",
		url.Values{"username": {username}, "password": {password}, "id": {id}}))
	if err != nil {
		return "", fmt.Errorf("login form: %w", err)
	}
	back, err := location(client.Get(callback))
	if err != nil {
		return "", fmt.Errorf("callback: %w", err)
	}
	backURL, err := url.Parse(back)
	if err != nil {
		return "", err
	}
	if got := backURL.Query().Get("state"); got != state {
		return "", fmt.Errorf("redirect %s: state %q, want %q", back, got, state)
	}
	resp, err := client.PostForm(p.Issuer+"oauth/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {backURL.Query().Get("code")},
		"redirect_uri": {redirect}, "client_id": {p.ClientID}, "code_verifier": {verifier},
	})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var tokens struct {
		IDToken string `json:"id_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tokens) != nil || tokens.IDToken == "" {
		return "", fmt.Errorf("token endpoint: %s: %s", resp.Status, body)
	}
	return tokens.IDToken, nil
}

// location returns a redirect's target.
func location(resp *http.Response, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("%s, want a redirect: %s", resp.Status, body)
	}
	return resp.Header.Get("Location"), nil
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
