package main

// The pages' "Sign in" with a real identity provider (zitadel/oidc's example OpenID Provider,
// internal/oidctest), in Chromium, through the real binary: web/e2e/signin.mjs.

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/oidctest"
)

// signInPageEvent is one line of web/e2e/signin.mjs.
type signInPageEvent struct {
	Event   string         `json:"event"`
	Heading string         `json:"heading"`
	Button  string         `json:"button"`
	Paste   bool           `json:"paste"`
	Origin  string         `json:"origin"`
	Form    bool           `json:"form"`
	Member  string         `json:"member"`
	Signout string         `json:"signout"`
	Titles  []string       `json:"titles"`
	Claims  map[string]any `json:"claims"`
	Address string         `json:"address"`
	Landed  string         `json:"landed"`
	Stored  *string        `json:"stored"`
	Path    string         `json:"path"`
	Text    string         `json:"text"`
	// Nonce is the nonce of the page's authorization request.
	Nonce string `json:"nonce"`
	// Keys are the storage keys left after the sign-out.
	Keys []string `json:"keys"`
	// Returns are hostile ways back and the URL the callback page resolves each to.
	Returns []struct {
		Form string `json:"form"`
		To   string `json:"to"`
	} `json:"returns"`
	// Accessibility is axe-core's violations on the signed-in home page.
	Accessibility []string `json:"accessibility"`
	Problems      []string `json:"problems"`
	Strangers     []string `json:"strangers"`
	Message       string   `json:"message"`
}

// TestPages_SignInWithTheProvider: with PLAYHEAD_OIDC_CLIENT_ID set, the home page without a
// token offers "Sign in" beside pasting one; it leads to the provider's own login form (another
// origin), and back on the home page the member is signed in with the provider's ID token (the
// provider's access token is opaque) and sees the continue-watching list seeded with a token of
// the same member that the test got from the provider itself. Once the token has expired, the
// page asks to sign in again with the provider. axe-core finds no violation on
// the signed-in page, no console error shows (the policy let the page call the provider), and
// no request goes to a third origin. "Sign out" forgets the token and everything
// oidc-client-ts kept, and ends the provider's session at its end_session_endpoint; signing in
// again goes through the provider's form. The ID token carries the nonce of the page's request.
// Hostile ways back (another host in every form a browser reads as one) resolve on the
// server's origin, and a whole sign-in asking for one lands on the home page; the provider's
// answer replayed, or with a forged state, keeps no token. With the provider unreachable,
// "Sign in" says on the page that it could not reach the provider, naming it.
func TestPages_SignInWithTheProvider(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	addr := binarytest.FreeAddr(t)
	const subject, username, password = "auth0|6571a", "viewer", "a viewer's password"
	provider := oidctest.Start(t, oidctest.Options{Users: []oidctest.User{{ID: subject, Username: username, Password: password}},
		RedirectURIs: []string{"http://" + addr + "/signin/callback"}})
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_HTTP_ADDR": addr, "PLAYHEAD_OIDC_ISSUER": provider.Issuer,
		"PLAYHEAD_OIDC_AUDIENCE": provider.ClientID, "PLAYHEAD_OIDC_CLIENT_ID": provider.ClientID, "PLAYHEAD_PUT_RATE": "0"})

	// The member's list: a position reported with the provider's token, listed once it is in.
	const title = "Le voyage dans la lune"
	mediaID := s.CreateMedia(t, binarytest.Token(t, 1, true), title)
	token := provider.SignIn(t, username, password)
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", mediaID), token, map[string]int{"position_ms": 754_000})
	for deadline := time.Now().Add(time.Minute); !listed(t, s, token, title); {
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/playback with the provider's token never listed %q", title)
		}
		// Not a bound on the node's speed: the loop waits for the position to be listed.
		time.Sleep(50 * time.Millisecond)
	}

	script := startBrowserScript(t, root, node, "signin.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_ISSUER="+provider.Issuer,
		"PLAYHEAD_USERNAME="+username, "PLAYHEAD_PASSWORD="+password, "PLAYHEAD_SHOTS="+screenshotsDir(t))
	events := map[string]signInPageEvent{}
	for {
		var ev signInPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("signin.mjs failed (%v): %s", err, events["error"].Message)
	}

	if ev := events["signedOut"]; ev.Heading != "Sign in" || !strings.HasPrefix(ev.Button, "Sign in with localhost:") || !ev.Paste {
		t.Errorf("the home page without a token: heading %q, button %q, paste form %v; want Sign in, the provider's button and the paste form", ev.Heading, ev.Button, ev.Paste)
	}
	if ev := events["login"]; ev.Origin+"/" != provider.Issuer || !ev.Form {
		t.Errorf("Sign in led to %s (a form: %v), want the provider's login form at %s", ev.Origin, ev.Form, provider.Issuer)
	}
	in := events["signedIn"]
	// The provider's ID token carries no name (its profile claims are in its userinfo, which
	// the page does not load): the header names the subject.
	if in.Member != "Member "+subject || in.Signout != "Sign out" || !slices.Equal(in.Titles, []string{title}) || in.Address != s.HTTPURL+"/" {
		t.Errorf("signed in: header %q, button %q, list %q at %s; want %q, Sign out, [%q] at %s/",
			in.Member, in.Signout, in.Titles, in.Address, "Member "+subject, title, s.HTTPURL)
	}
	if in.Claims["iss"] != provider.Issuer || in.Claims["sub"] != subject || in.Claims["aud"] == nil {
		t.Errorf("the tab holds a token with claims %v, want the provider's ID token for %s", in.Claims, subject)
	}
	if len(in.Accessibility) > 0 {
		t.Errorf("axe-core on the signed-in home page:\n%s", strings.Join(in.Accessibility, "\n"))
	}
	if ev := events["expired"]; !strings.Contains(ev.Text, "Your sign-in expired") || !strings.Contains(ev.Text, "Sign in with localhost:") {
		t.Errorf("a page with an expired token shows %q, want it to ask to sign in again with the provider", ev.Text)
	}
	if in.Nonce == "" || in.Claims["nonce"] != in.Nonce {
		t.Errorf("the page asked the provider with nonce %q and holds an ID token with nonce %v; want one, the same", in.Nonce, in.Claims["nonce"])
	}
	if ev := events["signOut"]; ev.Stored != nil || ev.Landed == "" || len(ev.Keys) > 0 {
		t.Errorf("after Sign out: landed on %q at the provider, the tab holds a token: %v, storage keys %q; want the provider's page, no token, no key", ev.Landed, ev.Stored != nil, ev.Keys)
	}
	if ev := events["returnTo"]; len(ev.Returns) == 0 {
		t.Error("no way back was judged")
	} else {
		for _, r := range ev.Returns {
			if !strings.HasPrefix(r.To, s.HTTPURL+"/") {
				t.Errorf("a sign-in asking to return to %q returns to %q, want a page of %s", r.Form, r.To, s.HTTPURL)
			}
		}
	}
	if ev := events["hostileReturn"]; ev.Address != s.HTTPURL+"/" {
		t.Errorf("a sign-in whose state returns to /\\evil.example/ landed on %q, want %s/", ev.Address, s.HTTPURL)
	}
	for _, name := range []string{"replay", "forgedState"} {
		if ev := events[name]; !strings.Contains(ev.Text, "did not finish") || ev.Stored != nil || strings.Contains(ev.Address, "code=") {
			t.Errorf("%s of the callback: status %q, token kept %v, address %q; want \"did not finish\", no token, no code in the address", name, ev.Text, ev.Stored != nil, ev.Address)
		}
	}
	if ev, want := events["unreachable"], "Could not reach the identity provider at "+strings.TrimSuffix(strings.TrimPrefix(provider.Issuer, "http://"), "/"); !strings.Contains(ev.Text, want) || !strings.HasPrefix(ev.Address, s.HTTPURL+"/") {
		t.Errorf("Sign in with the provider unreachable: notice %q at %q, want %q on the page", ev.Text, ev.Address, want)
	}
	if ev := events["again"]; ev.Path != "/login/username" || !ev.Form {
		t.Errorf("Sign in after the sign-out: %s (form %v), want the provider's login form", ev.Path, ev.Form)
	}
	done := events["done"]
	if len(done.Problems) > 0 || len(done.Strangers) > 0 {
		t.Errorf("console errors %q, requests to other origins %q; want none", done.Problems, done.Strangers)
	}
	if n := provider.Requests("/end_session"); n != 1 {
		t.Errorf("the provider's end_session_endpoint was called %d times, want once (Sign out)", n)
	}
	if n := provider.Requests("/oauth/token"); n < 2 {
		t.Errorf("the provider's token endpoint was called %d times, want the test's and the page's", n)
	}
}

// listed reports whether GET /v1/playback with token lists a media item titled title.
func listed(t *testing.T, s *binarytest.Server, token, title string) bool {
	t.Helper()
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback"), token, nil)
	var page struct {
		Items []struct {
			Title string `json:"title"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &page); err != nil {
		t.Fatalf("GET /v1/playback: %s (%v)", out, err)
	}
	return slices.ContainsFunc(page.Items, func(i struct {
		Title string `json:"title"`
	}) bool {
		return i.Title == title
	})
}
