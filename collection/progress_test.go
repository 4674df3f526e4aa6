package collection_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// ids returns the media ids of a continue-watching list, with "+" before up-next ones.
func ids(items []listItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = strconv.FormatInt(it.MediaID, 10)
		if it.UpNext != nil {
			out[i] = "+" + out[i]
		}
	}
	return out
}

// TestProgress_FinishingALessonListsTheNext: lessons 1 and 2 watched, lesson 3 to 96 %:
// continue watching lists lesson 4 at 0 in place of lesson 3, the collection shows 3 of 5
// watched and resumes at lesson 4; lesson 5 to the end leaves nothing of the collection in
// continue watching. Another member's view of the collection is untouched.
func TestProgress_FinishingALessonListsTheNext(t *testing.T) {
	b := setup(t)
	l := b.course(t, "레벨1", 5)
	b.watch(t, 7, l[0], 1)
	b.watch(t, 7, l[1], 1)
	b.watch(t, 7, l[2], 0.5)
	if got := b.continueWatching(t, 7, 20); len(got) != 1 || got[0].MediaID != l[2] || got[0].UpNext != nil {
		t.Fatalf("lesson 3 at 50%%: continue watching %v, want lesson 3 (%d) in progress only", ids(got), l[2])
	}
	b.watch(t, 7, l[2], 0.96)

	got := b.continueWatching(t, 7, 20)
	if len(got) != 1 || got[0].MediaID != l[3] || got[0].PositionMS != 0 || got[0].UpNext == nil ||
		got[0].UpNext.AfterMediaID != l[2] || got[0].UpNext.Collection != "레벨1" {
		t.Fatalf("lesson 3 at 96%%: continue watching %+v, want only lesson 4 (%d) up next at 0 after lesson 3 (%d)", got, l[3], l[2])
	}
	p := b.progress(t, 7, "레벨1")
	if p.Total != 5 || p.Watched != 3 || p.Resume == nil || p.Resume.MediaID != l[3] || p.Resume.PositionMS != 0 {
		t.Fatalf("collection: %d of %d watched, resume %+v; want 3 of 5, resume at lesson 4 (%d)", p.Watched, p.Total, p.Resume, l[3])
	}
	wantStates := []collection.State{collection.Watched, collection.Watched, collection.Watched, collection.NotStarted, collection.NotStarted}
	for i, it := range p.Items {
		if it.MediaID != l[i] || it.State != wantStates[i] {
			t.Errorf("item %d: media %d %s, want media %d %s", i, it.MediaID, it.State, l[i], wantStates[i])
		}
	}
	if p.LeftMS != 2*lessonMS || p.DurationMS != 5*lessonMS {
		t.Errorf("time left %d of %d ms, want %d of %d", p.LeftMS, p.DurationMS, 2*lessonMS, 5*lessonMS)
	}
	var mine struct{ Collections []collection.Summary }
	b.get(t, 7, "/v1/me/collections", &mine)
	if len(mine.Collections) != 1 || mine.Collections[0].Collection != "레벨1" || mine.Collections[0].Watched != 3 ||
		mine.Collections[0].Total != 5 || mine.Collections[0].Resume == nil || mine.Collections[0].Resume.MediaID != l[3] {
		t.Fatalf("GET /v1/me/collections: %+v, want 레벨1 with 3 of 5 watched resuming at %d", mine.Collections, l[3])
	}

	b.watch(t, 7, l[4], 1)
	if got := b.continueWatching(t, 7, 20); len(got) != 0 {
		t.Fatalf("lesson 5 watched to the end: continue watching %v, want nothing of the collection", ids(got))
	}

	other := b.progress(t, 8, "레벨1")
	if other.Watched != 0 || other.Resume == nil || other.Resume.MediaID != l[0] {
		t.Errorf("member 8 sees %d watched, resume %+v: member 7's progress leaked", other.Watched, other.Resume)
	}
	b.get(t, 8, "/v1/me/collections", &mine)
	if len(mine.Collections) != 0 {
		t.Errorf("member 8's started collections: %+v, want none", mine.Collections)
	}
}

// TestProgress_RewatchKeepsTheWatchedMark, as docs/api/playback.md documents it: at 50 % a media is
// in progress and listed; at 96 % it is watched and leaves the list; back at 10 % (a rewatch) it is
// listed again in progress, with its watched_at unchanged, and still counts as watched in its
// collection.
func TestProgress_RewatchKeepsTheWatchedMark(t *testing.T) {
	b := setup(t)
	l := b.course(t, "course", 1)
	b.watch(t, 3, l[0], 0.5)
	got := b.continueWatching(t, 3, 20)
	if len(got) != 1 || got[0].PositionMS != lessonMS/2 || got[0].WatchedAt != nil {
		t.Fatalf("at 50%%: %+v, want the lesson in progress at %d, not watched", got, lessonMS/2)
	}
	if p := b.progress(t, 3, "course"); p.Items[0].State != collection.InProgress || p.Items[0].PositionMS != lessonMS/2 {
		t.Fatalf("at 50%%: item %+v, want in_progress at %d", p.Items[0], lessonMS/2)
	}
	b.watch(t, 3, l[0], 0.96)
	if got := b.continueWatching(t, 3, 20); len(got) != 0 {
		t.Fatalf("at 96%% (the last lesson): %v, want nothing", ids(got))
	}
	watched := b.progress(t, 3, "course").Items[0]
	if watched.State != collection.Watched || watched.WatchedAt == nil {
		t.Fatalf("at 96%%: item %+v, want watched with watched_at", watched)
	}
	b.watch(t, 3, l[0], 0.1)
	got = b.continueWatching(t, 3, 20)
	if len(got) != 1 || got[0].PositionMS != lessonMS/10 || got[0].WatchedAt == nil || !got[0].WatchedAt.Equal(*watched.WatchedAt) {
		t.Fatalf("rewatch at 10%%: %+v, want the lesson at %d with watched_at %v", got, lessonMS/10, watched.WatchedAt)
	}
	again := b.progress(t, 3, "course")
	if again.Watched != 1 || again.Items[0].State != collection.Watched || again.Items[0].PositionMS != lessonMS/10 {
		t.Fatalf("rewatch at 10%%: collection %+v, want still watched (position %d)", again, lessonMS/10)
	}
}

// TestUpNext_FollowsTheCollectionItWasOpenedFrom: a media placed in two collections leads to
// the next item of the one the player opened it from; without that, of the one the member
// watched something else in most recently. A collection that does not hold the media, or a
// name no import can make, is refused.
func TestUpNext_FollowsTheCollectionItWasOpenedFrom(t *testing.T) {
	b := setup(t)
	a1 := b.place(t, "A", 1, 1, "A1")
	shared := b.place(t, "A", 1, 2, "shared")
	a3 := b.place(t, "A", 1, 3, "A3")
	b1 := b.place(t, "B", 1, 1, "B1")
	b.placeAgain(t, "B", 1, 2, shared)
	b3 := b.place(t, "B", 1, 3, "B3")
	next := func(member int64) int64 {
		t.Helper()
		got := b.continueWatching(t, member, 20)
		for _, it := range got {
			if it.UpNext != nil && it.UpNext.AfterMediaID == shared {
				return it.MediaID
			}
		}
		t.Fatalf("member %d: no up-next after %d in %+v", member, shared, got)
		return 0
	}

	open := "/v1/playback/" + strconv.FormatInt(shared, 10)
	if status, body := b.send(t, 5, http.MethodPost, open+"?collection=B"); status != http.StatusOK {
		t.Fatalf("open from B: %d %s", status, body)
	}
	b.watch(t, 5, shared, 1)
	if got := next(5); got != b3 {
		t.Errorf("opened from B: up next %d, want B3 (%d)", got, b3)
	}

	b.watch(t, 6, b1, 0.5)
	b.watch(t, 6, a1, 0.5)
	b.watch(t, 6, shared, 1)
	if got := next(6); got != a3 {
		t.Errorf("not opened from a collection, A used last: up next %d, want A3 (%d)", got, a3)
	}
	if status, body := b.send(t, 6, http.MethodPost, open+"?collection=B"); status != http.StatusOK {
		t.Fatalf("open from B: %d %s", status, body)
	}
	if got := next(6); got != b3 {
		t.Errorf("reopened from B: up next %d, want B3 (%d)", got, b3)
	}

	for query, want := range map[string]int{
		"?collection=C":   http.StatusUnprocessableEntity,
		"?collection=":    http.StatusBadRequest,
		"?collection=%00": http.StatusBadRequest,
		"?collection=%FF": http.StatusBadRequest,
		"?collection=" + strings.Repeat("x", 201): http.StatusBadRequest,
	} {
		if status, body := b.send(t, 6, http.MethodPost, open+query); status != want || !strings.Contains(string(body), `"error"`) {
			t.Errorf("POST %s: %d %s, want %d with a JSON error", query, status, body, want)
		}
	}
}

// TestUpNext_StaleFinishedReportListsNothing: the list's up-next comes from the newest
// finished item the flush recorded per collection, and the event_time guard decides what is
// recorded. Lesson 1 at 40 % flushed, then an older report of lesson 1 at 96 % (another
// node's, flushed late): the stale report moves no position (it brings only its watched
// mark, a finish before a rewatch), lesson 1 stays in progress and no up-next appears. A
// newer 96 % report then lists lesson 2 in its place.
func TestUpNext_StaleFinishedReportListsNothing(t *testing.T) {
	b := setup(t)
	lessons := b.course(t, "stale", 3)
	const member = 7
	newer := time.Now().UTC().Truncate(time.Microsecond)
	flush := func(fraction float64, at time.Time) {
		t.Helper()
		pos := playback.Position{PositionMS: int32(fraction * lessonMS), EventTime: at}
		if err := b.store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
			{Key: playback.Key{Member: member, Media: lessons[0]}, Value: pos}}); err != nil {
			t.Fatal(err)
		}
	}
	flush(0.4, newer)
	flush(0.96, newer.Add(-5*time.Second))
	if got, want := ids(b.continueWatching(t, member, 20)), []string{strconv.FormatInt(lessons[0], 10)}; !slices.Equal(got, want) {
		t.Errorf("after a stale 96%% report: list %v, want lesson 1 in progress only %v", got, want)
	}
	flush(0.96, newer.Add(5*time.Second))
	if got, want := ids(b.continueWatching(t, member, 20)), []string{"+" + strconv.FormatInt(lessons[1], 10)}; !slices.Equal(got, want) {
		t.Errorf("after a newer 96%% report: list %v, want lesson 2 up next %v", got, want)
	}
}

// TestProgress_ResumeIsTheFirstUnfinishedInOrder: lesson 1 watched, lesson 2 not started,
// lesson 3 half way, lesson 4 watched. Both the collection and GET /v1/me/collections count 2
// watched (a row in progress is not watched), leave lesson 2 whole and half of lesson 3, and
// resume at lesson 2 (the first unfinished in order), not at the one in progress.
func TestProgress_ResumeIsTheFirstUnfinishedInOrder(t *testing.T) {
	b := setup(t)
	l := b.course(t, "resume", 4)
	const member = 9
	b.watch(t, member, l[0], 1)
	b.watch(t, member, l[2], 0.5)
	b.watch(t, member, l[3], 1)
	check := func(where string, tot collection.Totals, resume *collection.Resume) {
		t.Helper()
		if tot.Total != 4 || tot.Watched != 2 || tot.LeftMS != lessonMS+lessonMS/2 {
			t.Errorf("%s: %d of %d watched, %d ms left; want 2 of 4, %d ms left", where, tot.Watched, tot.Total, tot.LeftMS, lessonMS+lessonMS/2)
		}
		if resume == nil || resume.MediaID != l[1] || resume.PositionMS != 0 {
			t.Errorf("%s: resume %+v, want lesson 2 (%d) at 0", where, resume, l[1])
		}
	}
	p := b.progress(t, member, "resume")
	check("GET /v1/collections/resume", p.Totals, p.Resume)
	var mine struct{ Collections []collection.Summary }
	b.get(t, member, "/v1/me/collections", &mine)
	if len(mine.Collections) != 1 {
		t.Fatalf("GET /v1/me/collections: %+v, want the one course", mine.Collections)
	}
	check("GET /v1/me/collections", mine.Collections[0].Totals, mine.Collections[0].Resume)
}

// TestUpNext_CarriesTheNextLessonsThumbnail: an up-next item shows the next lesson, so its
// thumbnail_url and status are that lesson's, not those of the finished one it stands in for.
func TestUpNext_CarriesTheNextLessonsThumbnail(t *testing.T) {
	b := setup(t)
	l := b.course(t, "썸네일", 3)
	if _, err := b.pool.Exec(context.Background(), `UPDATE media SET thumbnail_key = 'thumbs/' || id || '.jpg'`); err != nil {
		t.Fatal(err)
	}
	b.watch(t, 7, l[0], 1)
	got := b.continueWatching(t, 7, 20)
	if len(got) != 1 || got[0].MediaID != l[1] || got[0].UpNext == nil {
		t.Fatalf("continue watching %+v, want lesson 2 (%d) up next", got, l[1])
	}
	want := media.ObjectPath(fmt.Sprintf("thumbs/%d.jpg", l[1]))
	if u, err := url.Parse(got[0].Thumbnail); err != nil || u.Path != want || got[0].Status != string(media.StatusReady) {
		t.Errorf("up-next item: thumbnail_url %q, status %q; want a link to %s, READY", got[0].Thumbnail, got[0].Status, want)
	}
}
