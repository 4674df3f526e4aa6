package main

// The reliability suite: real processes, a real PostgreSQL restarted, slowed and cut off,
// workers killed, hostile clients. `make test` runs each fault a few rounds;
// `make chaos` runs PLAYHEAD_CHAOS_ROUNDS=20 of each. docs/internals/reliability.md records what it
// measured. Nothing here asserts how fast anything is: the latency checks compare against
// the delay the test itself injected into the database connection.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

// chaosRounds is how many rounds each repeated fault runs: PLAYHEAD_CHAOS_ROUNDS, or 3.
func chaosRounds(t *testing.T) int {
	t.Helper()
	return roundsFromEnv(t, "PLAYHEAD_CHAOS_ROUNDS", 3)
}

// roundsFromEnv reads a number of rounds from the environment variable name: def when it is
// unset, and the test fails when it is not a positive integer.
func roundsFromEnv(t *testing.T, name string, def int) int {
	t.Helper()
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive integer", name, raw)
	}
	return n
}

// firstLost describes the first of lost, for a failure message.
func firstLost(lost []binarytest.LostReport) string {
	if len(lost) == 0 {
		return "none"
	}
	return fmt.Sprintf("member %d media %d position %d", lost[0].Player.Member, lost[0].Player.Media, lost[0].Pos)
}

// first returns the first of msgs, or "none".
func first(msgs []string) string {
	if len(msgs) == 0 {
		return "none"
	}
	return msgs[0]
}

// TestChaos_SlowDatabase puts a proxy (internal/faultproxy) between Playhead and PostgreSQL
// that first adds 1 s to every answer, then holds all traffic back (a partition). The PUT p99
// stays below the injected delay because the request path never waits on the database. While
// the database is cut off, the players' newest positions are held in place (no drop);
// new viewers who arrive then fill the buffer up to PLAYHEAD_BUFFER_MAX_KEYS, beyond which
// their positions are dropped (counted). When the database answers again, flushing catches up
// while the node runs (depth 0, nothing held) and every player's last report is stored before
// the stop.
func TestChaos_SlowDatabase(t *testing.T) {
	dbURL := pgtest.URL(t)
	proxy, proxied := pgtest.Proxied(t, dbURL)
	const maxKeys = 1000
	s := binarytest.Start(t, map[string]string{"DATABASE_URL": proxied, "PLAYHEAD_PUT_RATE": "0",
		"PLAYHEAD_FLUSH_INTERVAL": "100ms", "PLAYHEAD_FLUSH_BATCH": "200", "PLAYHEAD_BUFFER_CAPACITY": "1000",
		"PLAYHEAD_BUFFER_MAX_KEYS": fmt.Sprint(maxKeys)})
	players := binarytest.NewPlayers(t, s, 200, 400_000, 4) // the media are cached from here on
	load := binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 16, Pace: 10 * time.Millisecond})
	// New viewers of the same (cached) media, more of them than the buffer may hold.
	newcomers := make([]*binarytest.Player, 2*maxKeys)
	for i := range newcomers {
		m := int64(450_000 + i)
		newcomers[i] = &binarytest.Player{Member: m, Media: players[i%len(players)].Media, Token: binarytest.Token(t, m, false)}
	}

	// Large enough that a PUT that waited on the database at all is far beyond its p99 even on
	// a loaded machine (the p99 of a normal phase is tens of milliseconds).
	const injected = time.Second
	dropped := func() float64 { return s.Metric(t, `playhead_playback_buffer_lost_total{reason="full"}`) }
	// phase records the latencies of the PUTs answered while wait runs.
	phase := func(name string, wait func()) []time.Duration {
		load.TakeLatencies()
		wait()
		lat := load.TakeLatencies()
		t.Logf("%-8s %5d PUTs answered 204: p50 %v, p99 %v, max %v; buffer depth %v, held keys %v, dropped so far %v",
			name, len(lat), binarytest.Quantile(lat, 0.5), binarytest.Quantile(lat, 0.99), binarytest.Quantile(lat, 1),
			s.Metric(t, "playhead_playback_buffer_depth"), s.Metric(t, "playhead_playback_buffer_held_keys"), dropped())
		return lat
	}
	// Every phase lasts until every player has reported in it at least once.
	everyPlayer := func() { load.WaitRounds(t, 2) }
	load.WaitAccepted(t, 1_000)
	normal := phase("normal", everyPlayer)
	proxy.SetLatency(injected)
	slow := phase("slow", everyPlayer)
	droppedBefore := dropped()
	proxy.Partition()
	var flood *binarytest.Load
	cut := phase("cut off", func() {
		everyPlayer()
		if d := dropped(); d != droppedBefore {
			t.Fatalf("%v positions of %d players dropped while the database was cut off; their keys fit the buffer (max %d)",
				d-droppedBefore, len(players), maxKeys)
		}
		// Then the newcomers arrive, until the buffer is full and drops.
		flood = binarytest.StartLoad(t, s, newcomers, binarytest.LoadConfig{Workers: 8, Pace: 10 * time.Millisecond})
		giveUp := time.Now().Add(time.Minute)
		for dropped() == droppedBefore {
			if time.Now().After(giveUp) {
				t.Fatalf("no drop was counted a minute after %d new viewers arrived during the cut-off (held keys %v)",
					len(newcomers), s.Metric(t, "playhead_playback_buffer_held_keys"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		everyPlayer()
	})
	droppedDuring := dropped() - droppedBefore
	flood.Stop()
	flushedAtHeal := s.Metric(t, "playhead_playback_buffer_flushed_rows_total")
	proxy.Heal()
	proxy.SetLatency(0)
	phase("back", func() {
		// The players' reports dropped on the full buffer are lost by design, so the load stops
		// only after every player has reported again with no drop since the last one: its last
		// report is then in the buffer, and the graceful stop writes it.
		giveUp := time.Now().Add(time.Minute)
		for {
			before := dropped()
			everyPlayer()
			if dropped() == before {
				return
			}
			if time.Now().After(giveUp) {
				t.Fatalf("the buffer still drops a minute after the database came back (held keys %v)", s.Metric(t, "playhead_playback_buffer_held_keys"))
			}
		}
	})
	load.Stop()
	// Recovery without the stop's final drain: the backlog flushes while the node runs, until
	// nothing is waiting in the channel or held for writing.
	waitBufferWritten(t, s)
	flushedAfter := s.Metric(t, "playhead_playback_buffer_flushed_rows_total") - flushedAtHeal
	stored := binarytest.StoredPositions(t, dbURL) // before the stop: what the running node wrote
	t.Logf("after recovery: %v rows flushed, buffer depth 0, 0 keys held; drops: %v before the newcomers, %v in all",
		flushedAfter, droppedBefore, dropped())
	s.Stop(t)
	if flushedAfter < float64(len(players)) {
		t.Errorf("%v rows flushed after the database came back, want at least one per player (%d)", flushedAfter, len(players))
	}

	if counts := load.Counts(); !counts.AllOK() {
		t.Errorf("PUTs: %s; want every one answered 204 whatever the database does", counts)
	}
	if counts := flood.Counts(); !counts.AllOK() {
		t.Errorf("newcomers' PUTs: %s; want every one answered 204, dropped or not", counts)
	}
	for name, lat := range map[string][]time.Duration{"slow": slow, "cut off": cut} {
		// A PUT that waited for the database could not be faster than the delay the proxy adds
		// to every answer; 99 of 100 PUTs are (a threshold against the injected delay, not a
		// measurement of speed).
		if len(lat) == 0 || binarytest.Quantile(lat, 0.99) >= injected {
			t.Errorf("%s database: %d PUTs, p99 %v; want many, with a p99 below the injected %v (normal p99 %v)",
				name, len(lat), binarytest.Quantile(lat, 0.99), injected, binarytest.Quantile(normal, 0.99))
		}
	}
	if droppedBefore != 0 {
		t.Errorf("%v drops before the newcomers arrived, want 0 (200 players fit the bound of %d keys)", droppedBefore, maxKeys)
	}
	if droppedDuring == 0 {
		t.Error("no drop was counted while the database was cut off and the buffer full")
	}
	lost, bad := binarytest.Audit(append(players[:len(players):len(players)], newcomers...), stored)
	if len(bad) > 0 {
		t.Errorf("%d stored rows were never sent: %v", len(bad), bad[:min(3, len(bad))])
	}
	// What the players reported once the database answered again was written before the stop.
	// (The newcomers stopped during the cut-off: what of theirs was dropped is lost by design.)
	for _, l := range lost {
		if l.Player.Member < 450_000 && l.Player.LastAcked == l.Pos {
			t.Errorf("member %d: its last report (%d ms), after the database came back, is not stored", l.Player.Member, l.Pos)
			break
		}
	}
}

// TestChaos_SIGTERMWithFullBuffer stops the server while its buffer holds every position of
// the run (nothing flushed yet: a 1 h interval and a huge batch), in rounds: every position
// answered 204 is stored.
func TestChaos_SIGTERMWithFullBuffer(t *testing.T) {
	rounds := chaosRounds(t)
	var total, held int64
	for round := range rounds {
		s := binarytest.Start(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": "1h",
			"PLAYHEAD_FLUSH_BATCH": "100000", "PLAYHEAD_BUFFER_CAPACITY": "100000"})
		players := binarytest.NewPlayers(t, s, 300, int64(500_000+round*1_000), 3)
		load := binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 32})
		load.WaitAccepted(t, int64(3_000+rand.IntN(3_000)))
		// The buffer must hold the run at the signal, or the stop's drain is not what is tested.
		depth := s.Metric(t, "playhead_playback_buffer_depth") + s.Metric(t, "playhead_playback_buffer_held_keys")
		flushed := s.Metric(t, "playhead_playback_buffer_flush_rows_count")
		s.Signal(t, syscall.SIGTERM)
		if flushed != 0 || depth == 0 {
			t.Fatalf("round %d: at the signal the buffer had flushed %v times and held %v keys; want no flush yet and keys held", round, flushed, depth)
		}
		code := s.Wait(t, binarytest.ExitTimeout)
		load.Stop()
		if code != 0 {
			t.Fatalf("round %d: exit status %d", round, code)
		}
		lost, bad := binarytest.Audit(players, binarytest.StoredPositions(t, s.DBURL))
		total += load.Accepted.Load()
		held += int64(depth)
		if len(lost) > 0 || len(bad) > 0 {
			t.Fatalf("round %d: %d acknowledged positions lost, %d wrong rows (first lost: %s; first wrong: %s)",
				round, len(lost), len(bad), firstLost(lost), first(bad))
		}
	}
	t.Logf("%d rounds: %d positions answered 204, all stored; %d entries and keys were waiting in the buffer at the signals", rounds, total, held)
}

// TestChaos_Kill9LossWindow kills the server with SIGKILL in the middle of a load, in rounds,
// and measures what is lost: only positions acknowledged within one flush interval plus the
// flush in progress before the kill (the documented loss window). A position acknowledged after
// flush k read its key is written by flush k+1, which starts one interval after flush k and
// commits one flush time later; the flush time is measured in the round (the slowest completed
// flush, as the upper bound of its histogram bucket).
func TestChaos_Kill9LossWindow(t *testing.T) {
	const interval = time.Second
	rounds := chaosRounds(t)
	var acked, lostTotal, playersBehind int
	var worst, slowest time.Duration
	for round := range rounds {
		s := binarytest.Start(t, map[string]string{"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_FLUSH_INTERVAL": interval.String()})
		players := binarytest.NewPlayers(t, s, 300, int64(600_000+round*1_000), 3)
		load := binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 32, Pace: 5 * time.Millisecond})
		load.WaitAccepted(t, 2_000)
		// Let a few flushes of the load complete, then kill at a random point: anywhere in two
		// intervals after a flush, so that a flusher slower than its interval is caught too.
		waitFlushes(t, s, 3)
		time.Sleep(time.Duration(rand.Int64N(int64(2 * interval))))
		flushTime := slowestFlush(t, s)
		killAt := time.Now()
		s.Kill(t)
		load.Stop()
		window := interval + flushTime
		slowest = max(slowest, flushTime)
		lost, bad := binarytest.Audit(players, binarytest.StoredPositions(t, s.DBURL))
		if len(bad) > 0 {
			t.Fatalf("round %d: rows never sent: %v", round, bad[:min(3, len(bad))])
		}
		acked += int(load.Accepted.Load())
		lostTotal += len(lost)
		behind := map[int64]bool{}
		for _, l := range lost {
			behind[l.Player.Member] = true
		}
		playersBehind += len(behind)
		for _, l := range lost {
			age := killAt.Sub(l.At)
			worst = max(worst, age)
			if age > window {
				t.Errorf("round %d: member %d's position %d, acknowledged %v before the kill, was lost: older than the window of %v "+
					"(interval %v + slowest flush %v)", round, l.Player.Member, l.Pos, age.Round(time.Millisecond), window, interval, flushTime)
				break
			}
		}
	}
	t.Logf("%d rounds: %d positions acknowledged, %d lost to kill -9 (%.2f%%, %d player-rounds left behind their last report); "+
		"the oldest lost was acknowledged %v before the kill (flush interval %v, slowest flush at most %v)",
		rounds, acked, lostTotal, 100*float64(lostTotal)/float64(max(acked, 1)), playersBehind, worst.Round(time.Millisecond), interval, slowest)
}

// slowestFlush returns the upper bound of the histogram bucket of the server's slowest
// completed flush so far. The total is the +Inf bucket of the same scrape: read from another
// scrape, a flush completing in between left no bucket equal to it.
func slowestFlush(t *testing.T, s *binarytest.Server) time.Duration {
	t.Helper()
	const name = "playhead_playback_buffer_flush_duration_seconds"
	counts := map[float64]float64{}
	for line := range strings.Lines(s.Metrics(t)) {
		if le, count, ok := bucket(line, name); ok {
			counts[le] = count
		}
	}
	total := counts[math.Inf(1)]
	bound := math.Inf(1)
	for le, count := range counts {
		if count == total && le < bound {
			bound = le
		}
	}
	if math.IsInf(bound, 1) {
		t.Fatalf("no bucket of %s holds every flush (%v flushes)", name, total)
	}
	return time.Duration(bound * float64(time.Second))
}

// bucket parses a histogram bucket line of metric name: its upper bound and its count.
func bucket(line, name string) (le, count float64, ok bool) {
	rest, found := strings.CutPrefix(line, name+`_bucket{le="`)
	if !found {
		return 0, 0, false
	}
	bound, value, found := strings.Cut(rest, `"} `)
	if !found {
		return 0, 0, false
	}
	le, err1 := strconv.ParseFloat(bound, 64)
	count, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
	return le, count, err1 == nil && err2 == nil
}

// waitBufferWritten waits until the running node s has written everything it accepted: no key
// waits in its buffer's channel or is held by its flusher (a held key counts until the flush
// that wrote it committed). Call it once nothing is sent to s any more.
func waitBufferWritten(t *testing.T, s *binarytest.Server) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute)
	for s.Metric(t, "playhead_playback_buffer_depth") != 0 || s.Metric(t, "playhead_playback_buffer_held_keys") != 0 {
		if time.Now().After(giveUp) {
			t.Fatalf("a minute after the load stopped, the buffer still holds %v keys (depth %v, held for retry %v)",
				s.Metric(t, "playhead_playback_buffer_held_keys"), s.Metric(t, "playhead_playback_buffer_depth"),
				s.Metric(t, "playhead_playback_buffer_retry_held_keys"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFlushes waits until the server's playback buffer has completed n more flushes.
func waitFlushes(t *testing.T, s *binarytest.Server, n float64) {
	t.Helper()
	flushes := func() float64 { return s.Metric(t, "playhead_playback_buffer_flush_rows_count") }
	target := flushes() + n
	giveUp := time.Now().Add(time.Minute)
	for flushes() < target {
		if time.Now().After(giveUp) {
			t.Fatalf("the buffer did not complete %v more flushes within a minute", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
