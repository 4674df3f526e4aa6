package main

// A #token=… link must not switch a signed-in tab's member silently (login CSRF: the page
// would then act, and upload, as the link's member). In Chromium, through the real binary:
// web/e2e/session.mjs.

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// sessionPageEvent is one line of web/e2e/session.mjs.
type sessionPageEvent struct {
	Event    string `json:"event"`
	Member   string `json:"member"`   // the header's "Member N", empty while a question is shown
	Question string `json:"question"` // the switch question's text, empty when not asked
	Focused  string `json:"focused"`
	Stored   string `json:"stored"` // which token the tab holds: A, B, B2, none
	Hash     string `json:"hash"`
	// Sent lists the tokens the page's requests carried since the step before.
	Sent          []string `json:"sent"`
	Accessibility []string `json:"accessibility"`
	Problems      []string `json:"problems"`
	Message       string   `json:"message"`
	// Signin, Heading, Button and Paste are the signed-out card: its settled ways to sign in
	// (token or provider), its heading, whether it has the provider's button and the paste form.
	Signin  string `json:"signin"`
	Heading string `json:"heading"`
	Button  bool   `json:"button"`
	Paste   bool   `json:"paste"`
}

// TestPages_TokenLinkNeverSwitchesTheMemberSilently: without a token, on a server with no
// identity provider, the home page offers the paste form and no "Sign in" button. A tab with no
// token takes a link's token as before. A link of another member opened over it asks first, with the current member's
// choice focused, and keeps the tab's token (and its API calls) as they were until the person
// switches; "Stay" keeps member A, "Switch" makes it member B. A link of the member already
// signed in is taken without a question, unless its role differs (an admin token of member B
// over member B's asks too). The address never keeps the token. No axe-core
// violation on the question.
func TestPages_TokenLinkNeverSwitchesTheMemberSilently(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	s := binarytest.Start(t, nil)
	a, b := binarytest.Token(t, 1, false), binarytest.Token(t, 2, false)
	b2 := binarytest.Token(t, 2, false)
	for b2 == b { // minted in the same second they are equal; the step needs two tokens of B
		b2 = binarytest.Token(t, 2, false)
	}
	bAdmin := binarytest.Token(t, 2, true)
	script := startBrowserScript(t, root, node, "session.mjs", "PLAYHEAD_URL="+s.HTTPURL, "PLAYHEAD_TOKEN="+a,
		"PLAYHEAD_OTHER="+b, "PLAYHEAD_OTHER2="+b2, "PLAYHEAD_OTHER_ADMIN="+bAdmin)
	events := map[string]sessionPageEvent{}
	for {
		var ev sessionPageEvent
		if !script.next(t, &ev) {
			break
		}
		events[ev.Event] = ev
	}
	if _, err := script.wait(); err != nil || events["error"].Message != "" {
		t.Fatalf("session.mjs failed (%v): %s", err, events["error"].Message)
	}

	check := func(step, member, stored string, sent ...string) sessionPageEvent {
		t.Helper()
		ev, ok := events[step]
		if !ok {
			t.Fatalf("session.mjs printed no %q event", step)
		}
		if ev.Member != member || ev.Stored != stored || !slices.Equal(ev.Sent, sent) || ev.Hash != "" {
			t.Errorf("%s: the header shows %q, the tab holds %s, its calls carried %v, the address ends %q; want %q, %s, %v and no token in the address",
				step, ev.Member, ev.Stored, ev.Sent, ev.Hash, member, stored, sent)
		}
		return ev
	}
	if ev := events["signedOut"]; ev.Signin != "token" || ev.Button || !ev.Paste || ev.Heading != "Sign in with a token" {
		t.Errorf("the home page without a token, no provider configured: ways %q, heading %q, provider button %v, paste form %v; want token, %q, no button, the form",
			ev.Signin, ev.Heading, ev.Button, ev.Paste, "Sign in with a token")
	}
	check("first", "Member 1", "A", "A")
	prompt := check("prompt", "", "A")
	if !strings.Contains(prompt.Question, "signed in as member 1") || !strings.Contains(prompt.Question, "signs in as member 2") ||
		prompt.Focused != "switch-stay" {
		t.Errorf("the question says %q with %q focused; want it to name member 1 and member 2, with staying focused", prompt.Question, prompt.Focused)
	}
	if len(prompt.Accessibility) > 0 {
		t.Errorf("axe-core on the question: %v", prompt.Accessibility)
	}
	check("stayed", "Member 1", "A", "A")
	check("switched", "Member 2", "B", "B")
	check("same", "Member 2", "B2", "B2")
	role := check("role", "", "B2")
	if !strings.Contains(role.Question, "signed in as member 2.") || !strings.Contains(role.Question, "signs in as member 2 (admin)") {
		t.Errorf("the question says %q; want it to name member 2 and member 2 (admin)", role.Question)
	}
	if p := events["done"].Problems; len(p) > 0 {
		t.Errorf("problems on the pages: %v", p)
	}
}
