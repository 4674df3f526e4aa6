package main

// Positions survive a database outage: the real binary, a real PostgreSQL that is restarted or
// stopped under it, real HTTP over loopback. `make test` runs the restart 3 rounds,
// `make chaos` PLAYHEAD_CHAOS_ROUNDS=20. Nothing here asserts how fast anything is; every wait
// waits for the thing it needs (a row, a metric, a log line, an exit).

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/faultproxy"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/playback"
)

// restartableCluster returns the test cluster, failing when it was not started by pgtest
// (a cluster given by URL cannot be stopped from here).
func restartableCluster(t *testing.T) *pgtest.Server {
	t.Helper()
	pg := pgtest.Shared(t)
	if pg.DataDir == "" {
		t.Fatalf("this test stops the test cluster, so it needs one started by pgtest: unset %s", pgtest.EnvURL)
	}
	return pg
}

// waitStored waits until the database holds, for every player in ps, at least its newest
// acknowledged position, and returns how many did not get there before giving up.
func waitStored(t *testing.T, dbURL string, ps []*binarytest.Player, giveUp time.Duration) (missing int) {
	t.Helper()
	deadline := time.Now().Add(giveUp)
	for {
		stored := binarytest.StoredPositions(t, dbURL)
		missing = 0
		for _, p := range ps {
			if stored[binarytest.PlaybackKey{Member: p.Member, Media: p.Media}] < p.LastAcked {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChaos_PostgresRestart: 200 players report every 50 ms (one load worker each) while
// PostgreSQL restarts (pg_ctl restart -m fast); once /readyz dips, half of them send one last
// position and go quiet, as a player does when it pauses. Every PUT is answered 204; flushing
// resumes after the restart without a stop (the quiet players' last positions reach the
// database before SIGTERM, and the others' keep being flushed); after a graceful stop every
// player's newest acknowledged position is stored. A buffer that dropped a failed flush would
// lose the quiet half's last positions with it.
func TestChaos_PostgresRestart(t *testing.T) {
	pg := restartableCluster(t)
	rounds := chaosRounds(t)
	var acked, quietLast, failures, retries int64
	for round := range rounds {
		s := binarytest.Start(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "100ms", "PLAYHEAD_PUT_RATE": "0"})
		players := binarytest.NewPlayers(t, s, 200, int64(700_000+round*1_000), 4)
		quiet, loud := players[:100], players[100:]
		every50ms := binarytest.LoadConfig{Workers: 100, Pace: 50 * time.Millisecond}
		quietLoad := binarytest.StartLoad(t, s, quiet, every50ms)
		loudLoad := binarytest.StartLoad(t, s, loud, every50ms)
		quietLoad.WaitRounds(t, 2)
		loudLoad.WaitRounds(t, 2)

		failuresBefore := s.Metric(t, "playhead_playback_buffer_flush_failures_total")
		retriesBefore := s.Metric(t, "playhead_playback_buffer_retries_total")
		restartErr := make(chan error, 1)
		go func() { restartErr <- pg.Restart() }()
		giveUp := time.Now().Add(2 * time.Minute)
		for s.Ready() != http.StatusServiceUnavailable {
			if time.Now().After(giveUp) {
				t.Fatalf("round %d: /readyz never answered 503 while PostgreSQL restarted", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The quiet half sends one last position now, during the outage, and then nothing.
		quietLoad.Stop()
		var lastSent sync.WaitGroup
		var lastRefused atomic.Int64
		for _, p := range quiet {
			lastSent.Go(func() {
				if !quietLoad.ReportOnce(p) {
					lastRefused.Add(1)
				}
			})
		}
		lastSent.Wait()
		if n := lastRefused.Load(); n > 0 {
			t.Fatalf("round %d: %d of the quiet players' last reports were not answered 204: %s", round, n, quietLoad.Counts())
		}
		if err := <-restartErr; err != nil {
			t.Fatal(err)
		}
		for s.Ready() != http.StatusOK {
			if time.Now().After(giveUp) {
				t.Fatalf("round %d: /readyz did not answer 200 after the restart", round)
			}
			time.Sleep(20 * time.Millisecond)
		}
		flushedAtRecovery := s.Metric(t, "playhead_playback_buffer_flushed_rows_total")

		// Before any stop: the positions held through the outage are written once it is over.
		if missing := waitStored(t, s.DBURL, quiet, time.Minute); missing > 0 {
			t.Fatalf("round %d: a minute after PostgreSQL came back, %d of %d quiet players' last acknowledged positions are not stored: "+
				"flushing did not resume, or dropped what failed (flush failures %v, retries %v, held for retry %v)",
				round, missing, len(quiet), s.Metric(t, "playhead_playback_buffer_flush_failures_total")-failuresBefore,
				s.Metric(t, "playhead_playback_buffer_retries_total")-retriesBefore, s.Metric(t, "playhead_playback_buffer_retry_held_keys"))
		}
		// And the players still reporting are flushed as before.
		for s.Metric(t, "playhead_playback_buffer_flushed_rows_total") <= flushedAtRecovery {
			if time.Now().After(giveUp) {
				t.Fatalf("round %d: flushed rows did not grow after recovery (%v at recovery)", round, flushedAtRecovery)
			}
			time.Sleep(20 * time.Millisecond)
		}
		roundFailures := s.Metric(t, "playhead_playback_buffer_flush_failures_total") - failuresBefore
		roundRetries := s.Metric(t, "playhead_playback_buffer_retries_total") - retriesBefore
		if roundFailures < 1 || roundRetries < 1 {
			t.Fatalf("round %d: %v flush failures and %v retries across the restart; the outage did not reach the flusher, so the round proves nothing",
				round, roundFailures, roundRetries)
		}
		// The others report again after the outage, then everything stops gracefully.
		loudLoad.WaitRounds(t, 2)
		loudLoad.Stop()
		s.Stop(t)

		for name, l := range map[string]*binarytest.Load{"quiet": quietLoad, "others": loudLoad} {
			if counts := l.Counts(); !counts.AllOK() {
				t.Fatalf("round %d: %s players' PUTs across the restart: %s; want every one answered 204", round, name, counts)
			}
		}
		lost, bad := binarytest.Audit(players, binarytest.StoredPositions(t, s.DBURL))
		if len(lost) > 0 || len(bad) > 0 {
			t.Fatalf("round %d: after a graceful stop, %d acknowledged positions are missing and %d rows are wrong (first lost: %s; first wrong: %s)",
				round, len(lost), len(bad), firstLost(lost), first(bad))
		}
		acked += quietLoad.Accepted.Load() + loudLoad.Accepted.Load()
		quietLast += int64(len(quiet))
		failures += int64(roundFailures)
		retries += int64(roundRetries)
	}
	t.Logf("%d rounds: %d positions answered 204, all stored; %d quiet players' last positions (sent during the outage) stored before SIGTERM; "+
		"%d flush failures, %d retries", rounds, acked, quietLast, failures, retries)
}

// TestChaos_OutageLongerThanShutdownBudgetSpills stops PostgreSQL under load and then stops
// Playhead: the buffer cannot write before its budget, so it spills, and the process still
// exits 0 (an error would mean a stop step overran the budget). With PostgreSQL back, a
// restarted Playhead replays the spill file before it serves: every acknowledged position is
// stored and the file is gone.
func TestChaos_OutageLongerThanShutdownBudgetSpills(t *testing.T) {
	pg := restartableCluster(t)
	spillDir := t.TempDir()
	const budget = 5 * time.Second
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_SHUTDOWN_TIMEOUT": budget.String(), "PLAYHEAD_SPILL_DIR": spillDir,
		"PLAYHEAD_FLUSH_INTERVAL": "200ms", "PLAYHEAD_PUT_RATE": "0"})
	players := binarytest.NewPlayers(t, s, 300, 800_000, 3)
	load := binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 16, Pace: 20 * time.Millisecond})
	load.WaitRounds(t, 2)

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			if err := pg.Start(); err != nil {
				t.Errorf("start PostgreSQL again: %v", err)
			}
		}
	})
	giveUp := time.Now().Add(time.Minute)
	for s.Ready() != http.StatusServiceUnavailable {
		if time.Now().After(giveUp) {
			t.Fatal("/readyz did not answer 503 with PostgreSQL stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	load.WaitRounds(t, 2) // every player reports while the database is away
	load.Stop()
	if held := s.Metric(t, "playhead_playback_buffer_held_keys"); held == 0 {
		t.Fatal("nothing held during the outage; the test would prove nothing")
	}
	signalled := time.Now()
	s.Stop(t) // fails unless the exit status is 0
	took := time.Since(signalled)
	if !strings.Contains(s.Stderr.String(), "entries spilled") {
		t.Fatalf("no spill logged at the stop; stderr:\n%s", s.Stderr)
	}
	files, _ := filepath.Glob(filepath.Join(spillDir, "playback-*.spill"))
	if len(files) != 1 {
		t.Fatalf("spill files after the stop: %v, want 1", files)
	}
	spilled, err := buffer.ReadSpillFile[playback.Key, playback.Position](files[0], playback.SpillCodec{})
	if err != nil {
		t.Fatal(err)
	}

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	stopped = false
	again := binarytest.Start(t, map[string]string{"DATABASE_URL": s.DBURL, "PLAYHEAD_SPILL_DIR": spillDir, "PLAYHEAD_PUT_RATE": "0"})
	if !strings.Contains(again.Stderr.String(), "spill file replayed and removed") {
		t.Fatalf("no replay logged at the start; stderr:\n%s", again.Stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(spillDir, "playback-*")); len(left) != 0 {
		t.Fatalf("files left in the spill directory after the replay: %v", left)
	}
	if n := again.Metric(t, "playhead_playback_buffer_replayed_rows_total"); n != float64(len(spilled)) {
		t.Fatalf("replayed %v rows, the spill file held %d", n, len(spilled))
	}
	lost, bad := binarytest.Audit(players, binarytest.StoredPositions(t, s.DBURL))
	if len(lost) > 0 || len(bad) > 0 {
		t.Fatalf("after the spill and the replay, %d acknowledged positions are missing and %d rows are wrong (first lost: %s; first wrong: %s)",
			len(lost), len(bad), firstLost(lost), first(bad))
	}
	again.Stop(t)
	if counts := load.Counts(); !counts.AllOK() {
		t.Errorf("PUTs: %s; want every one answered 204", counts)
	}
	t.Logf("%d positions answered 204; SIGTERM during the outage: exit 0 after %v (budget %v), %d positions spilled; "+
		"after the restart all replayed and every acknowledged position stored",
		load.Accepted.Load(), took.Round(time.Millisecond), budget, len(spilled))
}

// TestServe_PoisonedBatchCostsOnlyTheBadRow: a position is accepted for a media that is then
// deleted before the flush (a foreign key violation in the batch). The batch's other rows are
// stored, the bad row is counted and logged, and flushing goes on.
func TestServe_PoisonedBatchCostsOnlyTheBadRow(t *testing.T) {
	const batch = 50
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_FLUSH_INTERVAL": "1h", "PLAYHEAD_FLUSH_BATCH": fmt.Sprint(batch), "PLAYHEAD_PUT_RATE": "0"})
	admin := binarytest.Token(t, 1, true)
	good, doomed := s.CreateMedia(t, admin, "good"), s.CreateMedia(t, admin, "deleted while held")
	put := func(member, mediaID int64) {
		t.Helper()
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", mediaID), binarytest.Token(t, member, false),
			map[string]any{"position_ms": 1000})
	}
	put(5_000, doomed) // accepted: the media is playable now
	pool := s.Pool(t)
	if _, err := pool.Exec(context.Background(), `DELETE FROM media WHERE id = $1`, doomed); err != nil {
		t.Fatal(err)
	}
	for member := int64(5_001); member < 5_000+batch; member++ {
		put(member, good) // the 50th key makes the flusher write all 50 in one batch
	}
	stored := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM playback WHERE media_id = $1`, good).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	badRows := func() float64 { return s.Metric(t, `playhead_playback_buffer_lost_total{reason="bad_row"}`) }
	giveUp := time.Now().Add(time.Minute)
	for stored() < batch-1 {
		if time.Now().After(giveUp) {
			t.Fatalf("%d of %d good rows stored a minute after the batch was complete (bad rows counted: %v)", stored(), batch-1, badRows())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := badRows(); n != 1 {
		t.Fatalf("bad rows counted: %v, want 1", n)
	}
	if !strings.Contains(s.Stderr.String(), "rows rejected by the database") {
		t.Fatalf("the rejected row was not logged; stderr:\n%s", s.Stderr)
	}
	put(5_000, good) // the member of the bad row can still write elsewhere
	s.Stop(t)
	if n := stored(); n != batch {
		t.Fatalf("%d rows stored for the good media after the stop, want %d", n, batch)
	}
}

// TestServe_CorruptSpillFileMovedAside: at start, a corrupt and a truncated spill file are
// moved aside with an error log, the intact one beside them is replayed, and the node serves
// (the replayed position is what GET answers).
func TestServe_CorruptSpillFileMovedAside(t *testing.T) {
	pool, dbURL := pgtest.Pool(t)
	var mediaID int64
	if err := pool.QueryRow(context.Background(), `
		WITH m AS (INSERT INTO members (id) VALUES (1) RETURNING id)
		INSERT INTO media (owner_id, title, status, visibility, duration_ms) SELECT id, 'spilled', 'READY', 'PUBLIC', 3600000 FROM m
		RETURNING id`).Scan(&mediaID); err != nil {
		t.Fatal(err)
	}
	spillDir := t.TempDir()
	dir, err := buffer.NewSpillDir[playback.Key, playback.Position](spillDir, "playback", playback.SpillCodec{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	var entries []buffer.Entry[playback.Key, playback.Position]
	for member := int64(10); member < 20; member++ {
		entries = append(entries, buffer.Entry[playback.Key, playback.Position]{
			Key: playback.Key{Member: member, Media: mediaID}, Value: playback.Position{PositionMS: int32(member * 1000), EventTime: at}})
	}
	intact, err := dir.Write(entries)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(intact)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(spillDir, "playback-20000101T000000.000000000Z-1.spill")
	truncated := filepath.Join(spillDir, "playback-20000101T000000.000000000Z-2.spill")
	if err := os.WriteFile(corrupt, []byte("this is not a spill file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	s := binarytest.Start(t, map[string]string{"DATABASE_URL": dbURL, "PLAYHEAD_SPILL_DIR": spillDir})
	for _, p := range []string{corrupt, truncated} {
		if _, err := os.Stat(p + ".corrupt"); err != nil {
			t.Errorf("%s was not moved aside: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(intact); !os.IsNotExist(err) {
		t.Errorf("the intact spill file is still there after the start (%v)", err)
	}
	if got := strings.Count(s.Stderr.String(), "spill file is corrupt; moved aside"); got != 2 {
		t.Errorf("%d corrupt-file errors logged, want 2; stderr:\n%s", got, s.Stderr)
	}
	if n := s.Metric(t, "playhead_playback_buffer_corrupt_spill_files_total"); n != 2 {
		t.Errorf("corrupt spill files counted: %v, want 2", n)
	}
	body := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback/%d", mediaID), binarytest.Token(t, 12, false), nil)
	if !strings.Contains(string(body), `"position_ms":12000`) {
		t.Errorf("GET after the replay answered %s, want the replayed position 12000", body)
	}
	s.Stop(t)
}

// TestServe_PlantedSpillRecordsAreRefused: the spill replay check (playback.ReplayCheck) is
// wired into the binary. A spill file with a valid checksum, as whoever can write the directory
// could plant it, holds one honest record and three that no PUT would have stored (past the
// media's end, an event time a day ahead, another member's private media): at start only the
// honest one is stored, the others are dropped and logged, and the file is gone.
func TestServe_PlantedSpillRecordsAreRefused(t *testing.T) {
	pool, dbURL := pgtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO members (id) VALUES (99)`); err != nil {
		t.Fatal(err)
	}
	var lesson, private int64
	for _, m := range []struct {
		id         *int64
		visibility string
	}{{&lesson, "PUBLIC"}, {&private, "PRIVATE"}} {
		if err := pool.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility, duration_ms)
			VALUES (99, 'spilled', 'READY', $1, 60000) RETURNING id`, m.visibility).Scan(m.id); err != nil {
			t.Fatal(err)
		}
	}
	spillDir := t.TempDir()
	dir, err := buffer.NewSpillDir[playback.Key, playback.Position](spillDir, "playback", playback.SpillCodec{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	record := func(member, mediaID int64, positionMS int32, eventTime time.Time) buffer.Entry[playback.Key, playback.Position] {
		return buffer.Entry[playback.Key, playback.Position]{Key: playback.Key{Member: member, Media: mediaID},
			Value: playback.Position{PositionMS: positionMS, EventTime: eventTime}}
	}
	file, err := dir.Write([]buffer.Entry[playback.Key, playback.Position]{
		record(10, lesson, 30_000, at),                  // honest
		record(11, lesson, 60_001, at),                  // past the end: served as watched
		record(12, lesson, 1_000, at.Add(24*time.Hour)), // a day ahead: freezes the position
		record(13, private, 1_000, at),                  // another member's private media
	})
	if err != nil {
		t.Fatal(err)
	}

	s := binarytest.Start(t, map[string]string{"DATABASE_URL": dbURL, "PLAYHEAD_SPILL_DIR": spillDir})
	stored := binarytest.StoredPositions(t, dbURL)
	want := map[binarytest.PlaybackKey]int32{{Member: 10, Media: lesson}: 30_000}
	if !maps.Equal(stored, want) {
		t.Errorf("stored after the replay: %v, want only the honest record %v", stored, want)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the spill file is still there after the start (%v)", err)
	}
	if !strings.Contains(s.Stderr.String(), "refused by the replay check") {
		t.Errorf("no refusal logged; stderr:\n%s", s.Stderr)
	}
	s.Stop(t)
}

// The metrics port's /readyz reports the buffer's figures beside readiness.
func TestServe_ReadyzReportsBuffer(t *testing.T) {
	s := binarytest.Start(t, nil)
	body := s.MustDo(t, http.StatusOK, http.MethodGet, s.MetricsURL+"/readyz", "", nil)
	for _, want := range []string{`"status":"ready"`, `"playback_buffer":`, `"held_for_retry":0`, `"oldest_held_for_retry_seconds":0`,
		`"retries":0`, `"replayed_rows":0`, `"lost":{"bad_row":0,"full":0,"spill_failed":0}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/readyz answered %s; want it to contain %s", body, want)
		}
	}
	s.Stop(t)
}

// TestOutage_PutsForKnownMediaOutliveTheCacheTTL: PostgreSQL stopped, a member keeps reporting
// on a media the node knew before the outage. Past the media's cache TTL the node cannot
// re-check it, and serves its last known decision (stale-if-error, at most
// PLAYHEAD_CACHE_MAX_STALE): every report is still answered 204 and, once the database is back,
// the newest one is stored. A PUT for a media the node never saw, and every other request that
// needs the database, answers 503 with a JSON error and Retry-After, never 500: an expired
// entry must not make every PUT for that media fail.
func TestOutage_PutsForKnownMediaOutliveTheCacheTTL(t *testing.T) {
	pg := restartableCluster(t)
	s := binarytest.Start(t, map[string]string{"PLAYHEAD_CACHE_TTL": "300ms", "PLAYHEAD_FLUSH_INTERVAL": "100ms",
		"PLAYHEAD_PUT_RATE": "0", "PLAYHEAD_SPILL_DIR": t.TempDir()})
	admin, member := binarytest.Token(t, 1, true), binarytest.Token(t, 42, false)
	// The media's creation notifies every node, and the node evicts the media when it handles
	// that notification: if it did so after the reports below had cached the media, the node
	// would no longer know it when the outage begins. So: wait until the node listens (its
	// cache is cleared once per connection, right after LISTEN), create the media, and wait
	// until the node has handled the creation's notification (the only one this test sends
	// before the outage).
	waitMetric(t, s, "playhead_media_cache_clears_total", 1)
	mediaID := s.CreateMedia(t, admin, "known before the outage")
	waitMetric(t, s, "playhead_media_cache_invalidations_total", 1)
	put := func(pos int) int {
		t.Helper()
		status, body, err := s.Do(http.MethodPut, s.URL("/v1/playback/%d", mediaID), member, map[string]any{"position_ms": pos})
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusNoContent {
			t.Fatalf("PUT position %d during the outage: %d %s, want 204 (stale served so far: %v)", pos, status, body,
				s.Metric(t, "playhead_media_cache_stale_served_total"))
		}
		return pos
	}
	// Report until one report is answered from the cache: the node knows the media.
	last := put(1_000)
	for hits := s.Metric(t, "playhead_media_cache_hits_total"); s.Metric(t, "playhead_media_cache_hits_total") == hits; {
		last = put(last + 1)
	}

	startPostgres := stopPostgres(t, pg)
	waitReady(t, s, http.StatusServiceUnavailable)
	// Report until the node has had to answer from a stale entry: its TTL passed during the
	// outage and the database could not be read.
	giveUp := time.Now().Add(time.Minute)
	for s.Metric(t, "playhead_media_cache_stale_served_total") < 1 {
		if time.Now().After(giveUp) {
			t.Fatal("no stale cache entry served a minute into the outage")
		}
		last = put(last + 1)
	}
	last = put(last + 1)

	// Everything that needs the database and cannot do without: 503, JSON, Retry-After.
	for _, r := range []struct{ what, method, path, body string }{
		{"PUT for a media never seen", http.MethodPut, fmt.Sprintf("/v1/playback/%d", mediaID+1000), `{"position_ms": 5}`},
		{"GET a position", http.MethodGet, fmt.Sprintf("/v1/playback/%d", mediaID), ""},
		{"POST (open) a position", http.MethodPost, fmt.Sprintf("/v1/playback/%d", mediaID), ""},
		{"DELETE (hide) a position", http.MethodDelete, fmt.Sprintf("/v1/playback/%d", mediaID), ""},
		{"GET the continue-watching list", http.MethodGet, "/v1/playback", ""},
		{"GET a media", http.MethodGet, fmt.Sprintf("/v1/media/%d", mediaID), ""},
	} {
		resp := rawDo(t, r.method, s.URL("%s", r.path), member, r.body)
		if resp.status != http.StatusServiceUnavailable || !strings.HasPrefix(resp.body, `{"error":`) || resp.header.Get("Retry-After") == "" {
			t.Errorf("%s during the outage: %d %s (Retry-After %q), want 503 with a JSON error and Retry-After",
				r.what, resp.status, resp.body, resp.header.Get("Retry-After"))
		}
	}

	startPostgres()
	waitReady(t, s, http.StatusOK)
	s.Stop(t)
	stored := binarytest.StoredPositions(t, s.DBURL)[binarytest.PlaybackKey{Member: 42, Media: mediaID}]
	if stored != int32(last) {
		t.Fatalf("stored position %d after the outage, want the last one answered 204, %d", stored, last)
	}
}

// stopPostgres stops the test cluster and returns the function that starts it again; if the
// test ends without calling it, a cleanup does.
func stopPostgres(t *testing.T, pg *pgtest.Server) (start func()) {
	t.Helper()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	var started bool
	t.Cleanup(func() {
		if !started {
			if err := pg.Start(); err != nil {
				t.Errorf("start PostgreSQL again: %v", err)
			}
		}
	})
	return func() {
		t.Helper()
		started = true
		if err := pg.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits until /readyz answers status.
func waitReady(t *testing.T, s *binarytest.Server, status int) {
	t.Helper()
	giveUp := time.Now().Add(2 * time.Minute)
	for s.Ready() != status {
		if time.Now().After(giveUp) {
			t.Fatalf("/readyz never answered %d", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitMetric waits until the metric reaches at least min.
func waitMetric(t *testing.T, s *binarytest.Server, name string, min float64) {
	t.Helper()
	giveUp := time.Now().Add(time.Minute)
	for s.Metric(t, name) < min {
		if time.Now().After(giveUp) {
			t.Fatalf("%s stayed below %v", name, min)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type rawResponse struct {
	status int
	header http.Header
	body   string
}

// rawDo sends one request and returns its status, headers and body.
func rawDo(t *testing.T, method, url, token, body string) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(out)}
}

// proxiedDatabase returns a fresh test database's URL and a URL to the same database through a
// fault proxy, whose Partition then holds all traffic (a database that does not answer).
func proxiedDatabase(t *testing.T) (proxy *faultproxy.Proxy, direct, viaProxy string) {
	t.Helper()
	direct = pgtest.URL(t)
	proxy, viaProxy = pgtest.Proxied(t, direct)
	return proxy, direct, viaProxy
}

// TestOutage_HungDatabaseAtStop: the database stops answering (connections stay open, nothing
// comes back) while positions are held and a GET waits on it; then SIGTERM. The hung request
// is cancelled once it has had half the budget and answers 503, the buffer spills what it
// holds, the process exits 0; with the database answering again, a restart replays the spill
// and every acknowledged position is stored. A hung request allowed the whole budget would
// keep its pool connection, so closing the pool would never return and the process would have
// to be killed.
func TestOutage_HungDatabaseAtStop(t *testing.T) {
	proxy, direct, viaProxy := proxiedDatabase(t)
	spillDir := t.TempDir()
	// Role api: the playback node, without the job runners (their stop on a hung database is
	// not this test's subject).
	s := binarytest.Start(t, map[string]string{"DATABASE_URL": viaProxy, "PLAYHEAD_ROLE": "api", "PLAYHEAD_SPILL_DIR": spillDir,
		"PLAYHEAD_SHUTDOWN_TIMEOUT": "4s", "PLAYHEAD_FLUSH_INTERVAL": "200ms", "PLAYHEAD_PUT_RATE": "0"})
	players := binarytest.NewPlayers(t, s, 50, 900_000, 2)
	load := binarytest.StartLoad(t, s, players, binarytest.LoadConfig{Workers: 8, Pace: 10 * time.Millisecond})
	load.WaitRounds(t, 2)
	proxy.Partition()
	load.WaitRounds(t, 1) // every player reports once more while the database does not answer
	load.Stop()

	connsBefore := s.Metric(t, "playhead_db_pool_acquired_conns")
	hung := make(chan rawResponse, 1)
	go func() {
		hung <- rawDo(t, http.MethodGet, s.URL("/v1/playback/%d", players[0].Media), players[0].Token, "")
	}()
	waitMetric(t, s, "playhead_db_pool_acquired_conns", connsBefore+1) // the GET holds a connection, waiting
	s.Signal(t, syscall.SIGTERM)
	if code := s.Wait(t, time.Minute); code != 0 {
		t.Fatalf("exit status %d after SIGTERM with the database hung, want 0; stderr:\n%s", code, s.Stderr)
	}
	if resp := <-hung; resp.status != http.StatusServiceUnavailable {
		t.Errorf("the GET hung on the database answered %d %s at the stop, want 503", resp.status, resp.body)
	}
	files, _ := filepath.Glob(filepath.Join(spillDir, "playback-*.spill"))
	if len(files) != 1 {
		t.Fatalf("spill files after the stop: %v, want 1; stderr:\n%s", files, s.Stderr)
	}

	proxy.Heal()
	again := binarytest.Start(t, map[string]string{"DATABASE_URL": direct, "PLAYHEAD_SPILL_DIR": spillDir, "PLAYHEAD_PUT_RATE": "0"})
	again.Stop(t)
	lost, bad := binarytest.Audit(players, binarytest.StoredPositions(t, direct))
	if len(lost) > 0 || len(bad) > 0 {
		t.Fatalf("after the spill and the replay, %d acknowledged positions are missing and %d rows are wrong (first lost: %s; first wrong: %s)",
			len(lost), len(bad), firstLost(lost), first(bad))
	}
}
