package collection_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestIsolation_AMemberNeverSeesOrMovesAnothersProgress: member 8 opens a shared lesson from
// collection Y and finishes it; member 7, who only started collection X, then reads every
// progress route and sends hostile collection values to POST /v1/playback/{id}?collection=.
// Member 7 sees only its own rows (no watched marks, no up-next, no started collection of
// member 8), no request is answered with a 5xx, and member 8's up-next and progress are the
// same afterwards.
func TestIsolation_AMemberNeverSeesOrMovesAnothersProgress(t *testing.T) {
	b := setup(t)
	x1 := b.place(t, "X", 1, 1, "X1")
	shared := b.place(t, "X", 1, 2, "shared")
	b.place(t, "X", 1, 3, "X3")
	b.place(t, "Y", 1, 1, "Y1")
	b.placeAgain(t, "Y", 1, 2, shared)
	y3 := b.place(t, "Y", 1, 3, "Y3")
	const owner, other = 8, 7
	open := "/v1/playback/" + strconv.FormatInt(shared, 10)
	if status, body := b.send(t, owner, http.MethodPost, open+"?collection=Y"); status != http.StatusOK {
		t.Fatalf("member %d opens from Y: %d %s", owner, status, body)
	}
	b.watch(t, owner, shared, 1)
	ownerList := func() []string { return ids(b.continueWatching(t, owner, 20)) }
	wantOwner := []string{"+" + strconv.FormatInt(y3, 10)}
	if got := ownerList(); !slices.Equal(got, wantOwner) {
		t.Fatalf("member %d: list %v, want Y3 up next %v", owner, got, wantOwner)
	}
	b.watch(t, other, x1, 0.5)

	hostile := []string{
		"?collection=X",
		"?collection=X&collection=Y",
		"?collection=Y&collection=X",
		"?collection=" + url.QueryEscape("Y' OR '1'='1"),
		"?collection=" + url.QueryEscape("Y'); DELETE FROM playback; --"),
		"?collection=" + url.QueryEscape("레벨1 🎬"),
		"?collection=%E2%80%AEY",
		"?collection=" + strings.Repeat("Y", 200),
		// Just under Fiber's 4 KiB read buffer, so the value reaches the handler. A longer URL is
		// refused with 431 before routing, and the server closes the connection while the client
		// may still be writing (a reset, not an answer); the hostile suite covers that case.
		"?collection=" + strings.Repeat("Y", 3_500),
		"?collection=",
		"?collection",
	}
	for _, q := range hostile {
		status, body := b.send(t, other, http.MethodPost, open+q)
		if status >= 500 || (status >= 400 && !strings.Contains(string(body), `"error"`)) {
			t.Errorf("member %d POST %s: %d %.200s, want an answer below 500 (a JSON error when refused)", other, q[:min(len(q), 60)], status, body)
		}
	}
	for _, name := range []string{"Y", "Y' OR '1'='1", "%", "_", "레벨1", strings.Repeat("é", 200)} {
		p := b.progress(t, other, name)
		if p.Watched != 0 {
			t.Errorf("member %d reads %q: %d watched, want 0 (member %d's marks)", other, name, p.Watched, owner)
		}
		for _, it := range p.Items {
			if it.WatchedAt != nil || (it.MediaID == shared && it.PositionMS != 0) {
				t.Errorf("member %d reads %q: item %+v carries member %d's progress", other, name, it, owner)
			}
		}
	}
	var mine struct {
		Collections []struct{ Collection string }
	}
	b.get(t, other, "/v1/me/collections", &mine)
	if len(mine.Collections) != 1 || mine.Collections[0].Collection != "X" {
		t.Errorf("member %d's started collections: %+v, want X only", other, mine.Collections)
	}
	// The accepted POSTs opened the shared lesson for member 7: its own row at 0, which an open
	// alone never lists (no resume point), so only X1.
	if got, want := ids(b.continueWatching(t, other, 20)), []string{strconv.FormatInt(x1, 10)}; !slices.Equal(got, want) {
		t.Errorf("member %d: list %v, want X1 alone, not the lesson it only opened, none up next: %v", other, got, want)
	}
	if got := ownerList(); !slices.Equal(got, wantOwner) {
		t.Errorf("member %d after member %d's requests: list %v, want %v", owner, other, got, wantOwner)
	}
	if p := b.progress(t, owner, "Y"); p.Watched != 1 || p.Resume == nil {
		t.Errorf("member %d's Y after member %d's requests: %+v, want 1 watched", owner, other, p)
	}
}
