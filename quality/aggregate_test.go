package quality_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/quality"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup returns a database with two READY media of member 1, an Aggregator on it that writes
// only when told (an hour's interval), and the media ids.
func setup(t *testing.T) (*pgxpool.Pool, *quality.Aggregator, [2]int64) {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	var ids [2]int64
	for i := range ids {
		if err := pool.QueryRow(context.Background(), `
			WITH m AS (INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING)
			INSERT INTO media (owner_id, title, status, visibility, duration_ms) VALUES (1, 'v', 'READY', 'PUBLIC', 600000) RETURNING id`).
			Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	a, err := quality.New(quality.Config{Pool: pool, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return pool, a, ids
}

// counters reads media_quality as metric/bucket → value for mediaID.
func counters(t *testing.T, pool *pgxpool.Pool, mediaID int64) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT metric || '/' || bucket, value FROM media_quality WHERE media_id = $1`, mediaID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The sums of many reports are written as one row per (media, metric, bucket), added to what is
// there, the media marked for the rollup; Stop writes what the period had not.
func TestAggregator_StopWritesTheSums(t *testing.T) {
	t.Parallel()
	pool, a, ids := setup(t)
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a.Add(ids[0], quality.Report{StartupMS: 1234, Has: quality.HasStartup})
	a.Add(ids[0], quality.Report{StartupMS: 880, PlayedMS: 5000, Height: 720, Has: quality.HasStartup | quality.HasPlayed | quality.HasHeight})
	a.Add(ids[0], quality.Report{PlayedMS: 4000, RebufferCount: 1, RebufferMS: 1000, Height: 360,
		Has: quality.HasPlayed | quality.HasRebufferCount | quality.HasRebufferMS | quality.HasHeight})
	a.Add(ids[0], quality.Report{PlayedMS: 2000, Has: quality.HasPlayed})
	// A session that failed before its first frame: a session and an error, no startup time.
	a.Add(ids[1], quality.Report{StartupMS: 300, Error: 2, Has: quality.HasStartup | quality.HasError})
	a.Add(ids[1], quality.Report{})
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	want0 := map[string]int64{"sessions/0": 2, "startup/1300": 1, "startup/880": 1, "played_ms/720": 5000, "played_ms/360": 4000,
		"played_ms/0": 2000, "rebuffers/0": 1, "rebuffer_ms/0": 1000}
	if got := counters(t, pool, ids[0]); !equal(got, want0) {
		t.Errorf("media 0: %v; want %v", got, want0)
	}
	want1 := map[string]int64{"sessions/0": 1, "errors/2": 1}
	if got := counters(t, pool, ids[1]); !equal(got, want1) {
		t.Errorf("media 1: %v; want %v", got, want1)
	}
	var marked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audience_dirty WHERE media_id = ANY($1)`, ids[:]).Scan(&marked); err != nil || marked != 2 {
		t.Errorf("%d media marked for the rollup, %v; want 2", marked, err)
	}

	// A second node (or period) adds to the counters.
	b, err := quality.New(quality.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(ids[1], quality.Report{StartupMS: 300, Has: quality.HasStartup})
	if err := b.Write(ctx); err != nil {
		t.Fatal(err)
	}
	want1 = map[string]int64{"sessions/0": 2, "errors/2": 1, "startup/300": 1}
	if got := counters(t, pool, ids[1]); !equal(got, want1) {
		t.Errorf("media 1 after a second write: %v; want %v", got, want1)
	}
}

// A write that fails keeps its sums for the next one, merged with what came meanwhile; a
// media deleted meanwhile is skipped.
func TestAggregator_AFailedWriteIsKept(t *testing.T) {
	t.Parallel()
	pool, a, ids := setup(t)
	ctx := context.Background()
	a.Add(ids[0], quality.Report{RebufferCount: 2, Has: quality.HasRebufferCount})
	a.Add(ids[1], quality.Report{RebufferCount: 1, Has: quality.HasRebufferCount})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Write(cancelled); err == nil {
		t.Fatal("a write with a cancelled context succeeded")
	}
	a.Add(ids[0], quality.Report{RebufferCount: 3, Has: quality.HasRebufferCount})
	if _, err := pool.Exec(ctx, `UPDATE media SET status = 'DELETED' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := counters(t, pool, ids[0]), map[string]int64{"rebuffers/0": 5}; !equal(got, want) {
		t.Errorf("media 0: %v; want %v", got, want)
	}
	if got := counters(t, pool, ids[1]); len(got) != 0 {
		t.Errorf("the deleted media got counters: %v", got)
	}
}

// While a write waits on a database that does not answer, reports of other media fill the
// node's map again; the failed write's media are given back only within MaxMedia, the rest
// dropped and counted, so a long outage holds at most MaxMedia media, not one more MaxMedia
// per failed write.
func TestAggregator_AFailedWriteKeepsTheMemoryBound(t *testing.T) {
	t.Parallel()
	// A "database" that takes the connection and never answers: the write waits for its context.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://u@"+ln.Addr().String()+"/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	a, err := quality.New(quality.Config{Pool: pool, Interval: time.Hour, MaxMedia: 2, Timeout: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r := quality.Report{RebufferCount: 1, Has: quality.HasRebufferCount}
	a.Add(1, r)
	a.Add(2, r)
	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() { failed <- a.Write(ctx) }()
	conn := <-accepted // the write took media 1 and 2 and is waiting
	defer conn.Close()
	a.Add(3, r)
	a.Add(4, r)
	cancel()
	if err := <-failed; err == nil {
		t.Fatal("the write to a database that never answered succeeded")
	}
	if got := dropped(t, reg); got != 2 {
		t.Errorf("dropped %v media of the failed write; want 2 (the node held media 3 and 4, MaxMedia 2)", got)
	}
}

// A node holds sums for at most MaxMedia media between two writes: a report for another one
// is dropped and counted, while the media held still add up; after the write there is room
// again.
func TestAggregator_MaxMedia(t *testing.T) {
	t.Parallel()
	pool, _, ids := setup(t)
	reg := prometheus.NewRegistry()
	a, err := quality.New(quality.Config{Pool: pool, Interval: time.Hour, MaxMedia: 1, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	r := quality.Report{RebufferCount: 1, Has: quality.HasRebufferCount}
	a.Add(ids[0], r)
	a.Add(ids[1], r)
	a.Add(ids[0], r)
	if err := a.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := dropped(t, reg); got != 1 {
		t.Errorf("dropped %v reports; want 1", got)
	}
	if got0, got1 := counters(t, pool, ids[0]), counters(t, pool, ids[1]); !equal(got0, map[string]int64{"rebuffers/0": 2}) || len(got1) != 0 {
		t.Errorf("media 0: %v, media 1: %v; want 2 rebuffers and none", got0, got1)
	}
	a.Add(ids[1], r)
	if err := a.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counters(t, pool, ids[1]); !equal(got, map[string]int64{"rebuffers/0": 1}) {
		t.Errorf("media 1 after the write: %v; want 1 rebuffer", got)
	}
}

// A player may say any height from 1 to 8 640: past quality.MaxHeights heights of one media
// in a period, the time played counts as of an unknown height (0), so a media's sums stay
// small.
func TestAggregator_HeightsAreBounded(t *testing.T) {
	t.Parallel()
	pool, a, ids := setup(t)
	for h := int32(1); h <= quality.MaxHeights+4; h++ {
		a.Add(ids[0], quality.Report{PlayedMS: 1000, Height: h, Has: quality.HasPlayed | quality.HasHeight})
	}
	a.Add(ids[0], quality.Report{PlayedMS: 1000, Height: 1, Has: quality.HasPlayed | quality.HasHeight})
	if err := a.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"played_ms/0": 4000, "played_ms/1": 2000}
	for h := 2; h <= quality.MaxHeights; h++ {
		want[fmt.Sprintf("played_ms/%d", h)] = 1000
	}
	if got := counters(t, pool, ids[0]); !equal(got, want) {
		t.Errorf("%v; want %v", got, want)
	}
}

// dropped reads playhead_quality_dropped_total from reg.
func dropped(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "playhead_quality_dropped_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no playhead_quality_dropped_total")
	return 0
}

func TestStartupBucket(t *testing.T) {
	for ms, want := range map[int32]int32{0: 0, 7: 7, 99: 99, 100: 100, 101: 110, 1234: 1300, 1300: 1300, 15001: 16000, 600000: 600000} {
		if got := quality.StartupBucket(ms); got != want {
			t.Errorf("StartupBucket(%d) = %d, want %d", ms, got, want)
		}
	}
}
