package playback_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// watchedBuckets reads key's watched ranges as the bucket numbers marked, and "" for none.
func watchedBuckets(t *testing.T, b *bundle, key playback.Key) string {
	t.Helper()
	var bits *string
	if err := b.pool.QueryRow(context.Background(), `SELECT watched::text FROM playback WHERE member_id = $1 AND media_id = $2`,
		key.Member, key.Media).Scan(&bits); err != nil {
		t.Fatal(err)
	}
	if bits == nil {
		return ""
	}
	var marked []string
	run := -1
	flushRun := func(end int) {
		if run < 0 {
			return
		}
		if end-1 == run {
			marked = append(marked, strconv.Itoa(run))
		} else {
			marked = append(marked, strconv.Itoa(run)+"-"+strconv.Itoa(end-1))
		}
		run = -1
	}
	for i, c := range *bits {
		if c == '1' && run < 0 {
			run = i
		}
		if c == '0' {
			flushRun(i)
		}
	}
	flushRun(len(*bits))
	return strings.Join(marked, ",")
}

// A member's reports mark what was played: consecutive reports (at most 15 s apart, moving
// forward at no more than twice real time) the range between them, a seek or a report after a
// long pause only the bucket it landed in, a rewatch backwards its bucket; a report older than
// the row's changes nothing, and with ranges off or the duration unknown nothing is kept.
// The media is 100 s long: a bucket is a second.
func TestStore_WatchedRangesFollowConsecutiveReports(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 100_000})
	key := playback.Key{Member: 3, Media: id}
	start := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	flush := func(store *playback.Store, key playback.Key, at time.Duration, positionMS int32) {
		t.Helper()
		err := store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
			{Key: key, Value: playback.Position{PositionMS: positionMS, EventTime: start.Add(at)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		at       time.Duration
		position int32
		want     string
	}{
		{0, 0, "0"},                                 // the first report: its bucket
		{5 * time.Second, 5_000, "0-5"},             // played on
		{10 * time.Second, 10_500, "0-10"},          // played on
		{15 * time.Second, 60_000, "0-10,60"},       // a seek forward (50 s in 5 s)
		{20 * time.Second, 69_000, "0-10,60-69"},    // played on at 1.8× speed
		{60 * time.Second, 70_000, "0-10,60-70"},    // after a pause of 40 s: its bucket only
		{65 * time.Second, 82_000, "0-10,60-70,82"}, // 12 s in 5 s, over twice real time: a seek
		{70 * time.Second, 20_000, "0-10,20,60-70,82"},
		{75 * time.Second, 25_000, "0-10,20-25,60-70,82"}, // rewatched from 20 s
		{72 * time.Second, 99_999, "0-10,20-25,60-70,82"}, // older than the row: nothing
		{90 * time.Second, 99_999, "0-10,20-25,60-70,82,99"},
	} {
		flush(b.store, key, step.at, step.position)
		if got := watchedBuckets(t, b, key); got != step.want {
			t.Fatalf("after the report of %d ms at %s: watched %q, want %q", step.position, step.at, got, step.want)
		}
	}

	// Coalesced in one flush: a batch holds the newest report only; the range runs from the
	// row's last one.
	other := playback.Key{Member: 4, Media: id}
	flush(b.store, other, 0, 30_000)
	flush(b.store, other, 9*time.Second, 39_000)
	if got := watchedBuckets(t, b, other); got != "30-39" {
		t.Errorf("two reports 9 s apart in one flush: watched %q, want 30-39", got)
	}

	off := playback.NewStore(b.pool, media.DefaultCompletion).WithoutWatchedRanges()
	flush(off, key, 95*time.Second, 50_000)
	if got := watchedBuckets(t, b, key); got != "0-10,20-25,60-70,82,99" {
		t.Errorf("with ranges off: watched %q, want it unchanged", got)
	}
	quiet := playback.Key{Member: 5, Media: id}
	flush(off, quiet, 0, 1_000)
	flush(off, quiet, 5*time.Second, 6_000)
	if got := watchedBuckets(t, b, quiet); got != "" {
		t.Errorf("a member's first reports with ranges off: watched %q, want nothing", got)
	}

	unknown := b.createMedia(t, map[string]any{"title": "live"})
	flush(b.store, playback.Key{Member: 3, Media: unknown}, 0, 1_000)
	if got := watchedBuckets(t, b, playback.Key{Member: 3, Media: unknown}); got != "" {
		t.Errorf("a media of unknown duration: watched %q, want nothing", got)
	}
}
