package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestServe_SIGTERMDrainsEveryAcceptedPosition runs a load of thousands of players against
// the binary, sends SIGTERM in the middle of it, and checks that the process exits 0 with
// every position it answered 204 in the database.
func TestServe_SIGTERMDrainsEveryAcceptedPosition(t *testing.T) {
	const (
		players     = 2_000
		firstMember = 1_000
		mediaCount  = 4
		workers     = 64
		minAccepted = 20_000
	)
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "1s", "PLAYHEAD_PUT_RATE": "0"})
	ps := binarytest.NewPlayers(t, s, players, firstMember, mediaCount)
	start := time.Now()
	load := binarytest.StartLoad(t, s, ps, binarytest.LoadConfig{Workers: workers})

	// Wait for enough accepted positions, then signal while the load is still running.
	load.WaitAccepted(t, minAccepted)
	acceptedAtSignal, atSignal := load.Accepted.Load(), load.Counts()
	signalAt := time.Now()
	s.Signal(t, syscall.SIGTERM)
	code := s.Wait(t, binarytest.ExitTimeout)
	exitAfter := time.Since(signalAt)
	load.Stop()
	final := load.Counts()
	if code != 0 {
		t.Errorf("playhead exited with status %d after SIGTERM, want 0", code)
	}

	stored := binarytest.StoredPositions(t, s.DBURL)
	lost, bad := binarytest.Audit(ps, stored)
	keysAcked, landedMore := 0, 0 // keys with a 204; keys whose stored value is newer than the last 204
	for _, p := range ps {
		if p.LastAcked > 0 {
			keysAcked++
		}
		if pos, ok := stored[binarytest.PlaybackKey{Member: p.Member, Media: p.Media}]; ok && pos > p.LastAcked {
			landedMore++ // a report whose answer was lost in the shutdown: allowed
		}
	}
	drops := droppedFromLog(s.Stderr.String())
	t.Logf("load: %d PUTs sent, %d answered 204 (%d of them after SIGTERM was sent); before SIGTERM: %s; in all: %s; "+
		"%d keys acknowledged, %d rows stored, %d rows newer than their last 204; buffer drops logged: %d; "+
		"exit status %d %s after SIGTERM; load ran %s before it",
		load.Sent.Load(), load.Accepted.Load(), load.Accepted.Load()-acceptedAtSignal, atSignal, final,
		keysAcked, len(stored), landedMore, drops, code, exitAfter.Round(time.Millisecond), signalAt.Sub(start).Round(time.Millisecond))

	// Before SIGTERM every report is answered 204. After it, 503 (draining) and no answer at all
	// (the process is gone) are allowed too.
	var unexpected []string
	for status, n := range atSignal.Reports {
		if status != http.StatusNoContent {
			unexpected = append(unexpected, fmt.Sprintf("%d PUTs answered %d before SIGTERM", n, status))
		}
	}
	if atSignal.TransportErrors > 0 {
		unexpected = append(unexpected, fmt.Sprintf("%d PUTs got no answer before SIGTERM (first: %s)", atSignal.TransportErrors, atSignal.FirstTransportError))
	}
	for status, n := range final.Reports {
		if status != http.StatusNoContent && status != http.StatusServiceUnavailable {
			unexpected = append(unexpected, fmt.Sprintf("%d PUTs answered %d", n, status))
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("unexpected answers during the load: %s", strings.Join(unexpected, "; "))
	}
	if load.Accepted.Load() < minAccepted {
		t.Errorf("%d PUTs answered 204, want at least %d", load.Accepted.Load(), minAccepted)
	}
	if keysAcked < players {
		t.Errorf("%d keys got a 204, want %d (every player)", keysAcked, players)
	}
	violations := bad
	behind := map[*binarytest.Player]bool{}
	for _, l := range lost {
		if !behind[l.Player] {
			behind[l.Player] = true
			violations = append(violations, fmt.Sprintf("member %d media %d: stored %d, older than the last 204 (%d)",
				l.Player.Member, l.Player.Media, stored[binarytest.PlaybackKey{Member: l.Player.Member, Media: l.Player.Media}], l.Player.LastAcked))
		}
	}
	if len(violations) > 0 {
		hint := ""
		if drops > 0 {
			hint = fmt.Sprintf(" (the buffer logged %d drops: a full buffer answers 204 and drops the position)", drops)
		}
		t.Errorf("%d of %d keys break \"every position answered 204 before the process exited is stored\"%s; first: %s",
			len(violations), players, hint, strings.Join(violations[:min(10, len(violations))], "; "))
	}
}

// droppedFromLog sums the "dropped" counts of the buffer's rate-limited drop warnings in the
// binary's JSON log.
func droppedFromLog(stderr string) int64 {
	var total int64
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg     string `json:"msg"`
			Dropped int64  `json:"dropped"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.Contains(rec.Msg, "dropped") {
			total += rec.Dropped
		}
	}
	return total
}
