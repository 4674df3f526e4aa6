package main

import (
	"path/filepath"
	"testing"
)

// TestPlayerSDK_HostileInChromium runs web/e2e/sdk-hostile.mjs: the SDK against a Playhead
// whose answers the script makes (a Retry-After of nothing, 0, negative or too large for a
// timer) and an integrator's mistakes (detach during the open or a report, a source replaced
// before detach, a paused video's tab hidden again and again, back online with nothing
// loaded). Each case is checked in the page and printed with its problems.
func TestPlayerSDK_HostileInChromium(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node := requireBrowser(t, root)
	script := startBrowserScript(t, root, node, "sdk-hostile.mjs")
	cases := 0
	for {
		var ev struct {
			Event    string   `json:"event"`
			Name     string   `json:"name"`
			Problems []string `json:"problems"`
			Message  string   `json:"message"`
		}
		if !script.next(t, &ev) {
			break
		}
		switch ev.Event {
		case "case":
			cases++
			for _, p := range ev.Problems {
				t.Errorf("%s: %s", ev.Name, p)
			}
		case "error":
			t.Errorf("sdk-hostile.mjs: %s", ev.Message)
		}
	}
	if _, err := script.wait(); err != nil || cases != 16 {
		t.Fatalf("sdk-hostile.mjs ended (%v) after %d cases, want 16", err, cases)
	}
}
