package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDispatch_Rotation: each player sends its first key's token until -rotate-at, then the
// rotated key's, never the first again, and each request says which key its token is of.
func TestDispatch_Rotation(t *testing.T) {
	o := options{stages: []stage{{time.Millisecond, 3}, {400 * time.Millisecond, 3}}, period: 50 * time.Millisecond, rotateAt: 200 * time.Millisecond}
	players := make([]player, 3)
	for i := range players {
		players[i] = player{token: fmt.Sprint("old-", i), next: fmt.Sprint("new-", i), media: 1}
	}
	seen := map[string][]string{} // player → the keys of its tokens, in order
	dispatch(context.Background(), o, players, time.Now(), func(r request) {
		key, player, _ := strings.Cut(r.token, "-")
		if (key == "new") != r.rotated {
			t.Errorf("a request with the token %q says rotated=%v", r.token, r.rotated)
		}
		if s := seen[player]; len(s) == 0 || s[len(s)-1] != key {
			seen[player] = append(s, key)
		}
	})
	for i := range players {
		if got := strings.Join(seen[fmt.Sprint(i)], ","); got != "old,new" {
			t.Errorf("player %d sent tokens of the keys %s, want old,new", i, got)
		}
	}
}
