package storage_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
)

// sweepFixture is a store with groups of objects in it, and a sweeper whose clock the test
// moves: the objects are "old" once the clock is past the grace period.
type sweepFixture struct {
	st      storage.Store
	clock   atomic.Pointer[time.Time]
	metrics *storage.SweepMetrics
	reg     *prometheus.Registry
}

// in use: hls/1/winner/ (a READY media's outputs), hls/2/running/ (a running claim), uploads/kept/.
var sweepInUse = map[string]bool{"hls/1/winner/": true, "hls/2/running/": true, "uploads/kept/": true}

func newSweepFixture(t *testing.T, st storage.Store) *sweepFixture {
	f := &sweepFixture{st: st, reg: prometheus.NewRegistry()}
	f.metrics = storage.NewSweepMetrics(f.reg)
	now := time.Now()
	f.clock.Store(&now)
	for _, k := range []string{
		"hls/1/winner/master.m3u8", "hls/1/winner/v0/seg_000.ts",
		"hls/1/killed/master.m3u8", "hls/1/killed/v0/seg_000.ts", "hls/1/killed/v0/seg_001.ts", // 3 objects
		"hls/2/running/master.m3u8",
		"hls/3/zombie/thumb.jpg",
		"hls/loose", // higher up than a group: not the sweep's business
		"uploads/kept/source", "uploads/ingest-7-abc/source",
		"other/x/y/z",
	} {
		put(t, st, k, "0123456789") // 10 bytes each
	}
	return f
}

// sweeper returns a sweeper of the fixture's store; lock, when given, is its Lock.
func (f *sweepFixture) sweeper(t *testing.T, passObjects int, lock ...func(context.Context) (func(), bool, error)) *storage.Sweeper {
	inUse := func(_ context.Context, groups []string) (map[string]bool, error) {
		out := map[string]bool{}
		for _, g := range groups {
			if sweepInUse[g] {
				out[g] = true
			}
		}
		return out, nil
	}
	cfg := storage.SweepConfig{
		Store: f.st,
		Rules: []storage.SweepRule{{Prefix: "hls/", Depth: 2, InUse: inUse}, {Prefix: "uploads", Depth: 1, InUse: inUse}},
		Grace: time.Hour, Interval: 20 * time.Millisecond, PassObjects: passObjects,
		Metrics: f.metrics, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return *f.clock.Load() },
	}
	if len(lock) > 0 {
		cfg.Lock = lock[0]
	}
	s, err := storage.NewSweeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *sweepFixture) advance(d time.Duration) {
	later := f.clock.Load().Add(d)
	f.clock.Store(&later)
}

// sweptKeys is what the fixture's store holds once the orphans are gone.
var sweptKeys = []string{"hls/1/winner/master.m3u8", "hls/1/winner/v0/seg_000.ts", "hls/2/running/master.m3u8", "hls/loose",
	"other/x/y/z", "uploads/kept/source"}

func TestSweeper(t *testing.T) {
	for name, newStore := range s3test.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("RemovesOldOrphansOnly", func(t *testing.T) {
				t.Parallel()
				f := newSweepFixture(t, newStore(t))
				s := f.sweeper(t, 0)
				// Within the grace period nothing goes, orphan or not.
				if res, err := s.Sweep(t.Context()); err != nil || res.Groups != 0 {
					t.Fatalf("a pass within the grace period: %+v, %v; want nothing removed", res, err)
				}
				f.advance(2 * time.Hour)
				res, err := s.Sweep(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if got := keys(t, f.st, "", ""); !slices.Equal(got, sweptKeys) {
					t.Fatalf("after the sweep the store holds %q, want %q", got, sweptKeys)
				}
				if res.Groups != 3 || res.Objects != 5 || res.Bytes != 50 {
					t.Errorf("pass result %+v, want 3 groups, 5 objects, 50 bytes", res)
				}
				if got := f.counter(t, "playhead_storage_orphan_objects_removed_total", "hls/"); got != 4 {
					t.Errorf("objects removed under hls/: %v, want 4", got)
				}
				if got := f.counter(t, "playhead_storage_orphan_bytes_removed_total", "uploads/"); got != 10 {
					t.Errorf("bytes removed under uploads/: %v, want 10", got)
				}
			})
			t.Run("BoundedPassesResume", func(t *testing.T) {
				t.Parallel()
				f := newSweepFixture(t, newStore(t))
				f.advance(2 * time.Hour)
				s := f.sweeper(t, 2) // at most 2 objects listed per folder and pass, whole groups
				if _, err := s.Sweep(t.Context()); err != nil {
					t.Fatal(err)
				}
				// hls/: the first pass lists hls/1/killed/ (3 objects, one group) and stops.
				if got := keys(t, f.st, "hls/1/", ""); !slices.Equal(got, []string{"hls/1/winner/master.m3u8", "hls/1/winner/v0/seg_000.ts"}) {
					t.Fatalf("after one pass hls/1/ holds %q", got)
				}
				if got := keys(t, f.st, "hls/3/", ""); len(got) != 1 {
					t.Fatalf("one bounded pass already reached hls/3/: %q", got)
				}
				for range 4 {
					if _, err := s.Sweep(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if got := keys(t, f.st, "", ""); !slices.Equal(got, sweptKeys) {
					t.Fatalf("after five bounded passes the store holds %q, want %q", got, sweptKeys)
				}
				// New orphans behind the cursor are found once the passes wrap around.
				put(t, f.st, "hls/1/late/master.m3u8", "x")
				f.advance(2 * time.Hour)
				for range 5 {
					if _, err := s.Sweep(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if got := keys(t, f.st, "hls/1/late/", ""); len(got) != 0 {
					t.Fatalf("an orphan behind the cursor is still there after the passes wrapped: %q", got)
				}
			})
			t.Run("GraceCountsPerGroup", func(t *testing.T) {
				// Two orphans in one pass, one older than the grace period and one younger:
				// only the older goes. (A pass of only old or only young groups cannot tell
				// a per-group check from a per-pass one.)
				t.Parallel()
				st := newStore(t)
				f := &sweepFixture{st: st, reg: prometheus.NewRegistry()}
				f.metrics = storage.NewSweepMetrics(f.reg)
				put(t, st, "hls/5/old/master.m3u8", "x")
				older := modTime(t, st, "hls/5/old/master.m3u8")
				// The store's clock may count whole seconds (S3): write the younger group until
				// its time differs.
				deadline := time.Now().Add(time.Minute)
				var younger time.Time
				for {
					put(t, st, "hls/5/young/master.m3u8", "x")
					if younger = modTime(t, st, "hls/5/young/master.m3u8"); younger.After(older) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the store's modification time did not move past %v in a minute", older)
					}
					time.Sleep(50 * time.Millisecond)
				}
				// The grace period (an hour) ends between the two.
				at := older.Add((younger.Sub(older)+1)/2 + time.Hour)
				f.clock.Store(&at)
				res, err := f.sweeper(t, 0).Sweep(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if got := keys(t, st, "", ""); !slices.Equal(got, []string{"hls/5/young/master.m3u8"}) || res.Groups != 1 {
					t.Fatalf("after a pass the store holds %q (%+v); want only the group younger than the grace period", got, res)
				}
			})
			t.Run("LockHeldElsewhereSweepsNothing", func(t *testing.T) {
				t.Parallel()
				f := newSweepFixture(t, newStore(t))
				f.advance(2 * time.Hour)
				var held atomic.Bool
				held.Store(true)
				var unlocked atomic.Int32
				s := f.sweeper(t, 0, func(context.Context) (func(), bool, error) {
					if held.Load() {
						return nil, false, nil
					}
					return func() { unlocked.Add(1) }, true, nil
				})
				res, err := s.Sweep(t.Context())
				if err != nil || !res.Skipped || res.Groups != 0 {
					t.Fatalf("a pass while another node holds the lock: %+v, %v; want skipped, nothing removed", res, err)
				}
				if got := keys(t, f.st, "", ""); len(got) != 11 {
					t.Fatalf("a skipped pass removed objects: the store holds %q", got)
				}
				held.Store(false)
				if res, err := s.Sweep(t.Context()); err != nil || res.Skipped || res.Groups != 3 {
					t.Fatalf("a pass holding the lock: %+v, %v; want 3 groups removed", res, err)
				}
				if unlocked.Load() != 1 {
					t.Errorf("the lock was released %d times after one pass, want 1", unlocked.Load())
				}
			})
			t.Run("Lifecycle", func(t *testing.T) {
				t.Parallel()
				f := newSweepFixture(t, newStore(t))
				f.advance(2 * time.Hour)
				never := f.sweeper(t, 0)
				if err := never.Stop(t.Context()); err != nil {
					t.Fatalf("Stop of a sweeper never started: %v", err)
				}
				s := f.sweeper(t, 0)
				if err := s.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := s.Start(t.Context()); err != nil {
					t.Fatalf("a second Start: %v", err)
				}
				deadline := time.Now().Add(30 * time.Second)
				for !slices.Equal(keys(t, f.st, "", ""), sweptKeys) {
					if time.Now().After(deadline) {
						t.Fatalf("the started sweeper did not remove the orphans: %q", keys(t, f.st, "", ""))
					}
					time.Sleep(20 * time.Millisecond)
				}
				for range 2 {
					if err := s.Stop(t.Context()); err != nil {
						t.Fatalf("Stop: %v", err)
					}
				}
				if err := s.Start(t.Context()); err == nil {
					t.Fatal("Start after Stop succeeded")
				}
			})
		})
	}
}

// modTime is the modification time the store lists for key.
func modTime(t *testing.T, st storage.Store, key string) time.Time {
	t.Helper()
	for obj, err := range st.List(t.Context(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		if obj.Key == key {
			return obj.ModTime
		}
	}
	t.Fatalf("%s is not listed", key)
	return time.Time{}
}

// counter reads the counter name{prefix} from the fixture's registry (0 when absent).
func (f *sweepFixture) counter(t *testing.T, name, prefix string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "prefix" && l.GetValue() == prefix {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// An unfinished write older than the grace period is aborted unless its group is in use: a
// resumable upload keeps one multipart upload open for as long as its client resumes it, which
// may be longer than the grace period.
func TestSweeper_UnfinishedWritesOfGroupsInUseStay(t *testing.T) {
	t.Parallel()
	st, bucket := s3test.Store(t)
	for _, key := range []string{"uploads/kept/source", "uploads/abandoned/source"} {
		id, err := st.StartParts(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutPart(t.Context(), key, id, 1, strings.NewReader("part"), 4); err != nil {
			t.Fatal(err)
		}
	}
	f := &sweepFixture{st: st, reg: prometheus.NewRegistry()}
	f.metrics = storage.NewSweepMetrics(f.reg)
	now := time.Now()
	f.clock.Store(&now)
	f.advance(2 * time.Hour)
	res, err := f.sweeper(t, 0).Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left := s3test.Shared(t).Unfinished(t, bucket); !slices.Equal(left, []string{"uploads/kept/source"}) || res.Unfinished != 1 {
		t.Fatalf("after a pass the unfinished writes are %q (%d aborted); want only the one in use (uploads/kept/)", left, res.Unfinished)
	}
}
