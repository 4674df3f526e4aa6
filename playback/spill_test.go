package playback_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// A row whose media was deleted while its position was buffered is a rejected row (the buffer
// splits the batch around it); the other rows of its batch are stored, and it is counted.
func TestStore_FlushRejectsRowOfDeletedMediaOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, options{flushBatch: 1000})
	kept := b.createMedia(t, map[string]any{"title": "kept", "duration_ms": 600_000})
	deleted := b.createMedia(t, map[string]any{"title": "deleted", "duration_ms": 600_000})
	at := time.Now().UTC().Truncate(time.Microsecond)
	for member := int64(1); member <= 40; member++ {
		if _, err := b.buf.Offer(playback.Key{Member: member, Media: kept}, playback.Position{PositionMS: int32(member), EventTime: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.buf.Offer(playback.Key{Member: 20, Media: deleted}, playback.Position{PositionMS: 5, EventTime: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `DELETE FROM media WHERE id = $1`, deleted); err != nil {
		t.Fatal(err)
	}

	err := b.store.Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: 20, Media: deleted}, Value: playback.Position{PositionMS: 5, EventTime: at}}})
	if !errors.Is(err, buffer.ErrRejected) {
		t.Fatalf("Flush of a row for a deleted media = %v, want a rejection", err)
	}

	b.flushNow(t) // one batch of 41 rows, one of them bad
	if n := b.count(t, `SELECT count(*) FROM playback WHERE media_id = $1`, kept); n != 40 {
		t.Fatalf("%d rows stored for the kept media, want all 40", n)
	}
	if lost := b.buf.Stats().Lost["bad_row"]; lost != 1 {
		t.Fatalf("lost bad rows = %d, want 1", lost)
	}
}

// A database that cannot be reached is not the batch's fault: the error is not a rejection,
// so the buffer keeps the batch and retries it.
func TestStore_FlushConnectionErrorIsTransient(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = playback.NewStore(pool, media.DefaultCompletion).Flush(context.Background(), []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: 1, Media: 1}, Value: playback.Position{PositionMS: 5, EventTime: time.Now()}}})
	if err == nil || errors.Is(err, buffer.ErrRejected) {
		t.Fatalf("Flush with no database = %v, want a transient error", err)
	}
}

// Positions survive a spill file unchanged (microsecond event times included), and records
// that the API could never have accepted are refused.
func TestSpillCodec_RoundTrip(t *testing.T) {
	t.Parallel()
	dir, err := buffer.NewSpillDir(t.TempDir(), "playback", buffer.Codec[playback.Key, playback.Position](playback.SpillCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_000, time.UTC)
	want := []buffer.Entry[playback.Key, playback.Position]{
		{Key: playback.Key{Member: 1, Media: 2}, Value: playback.Position{PositionMS: 0, EventTime: at}},
		{Key: playback.Key{Member: 1 << 40, Media: 1<<62 + 3}, Value: playback.Position{PositionMS: playback.MaxPositionMS, EventTime: at.Add(time.Microsecond)}},
	}
	path, err := dir.Write(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := buffer.ReadSpillFile(path, buffer.Codec[playback.Key, playback.Position](playback.SpillCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Value.PositionMS != want[i].Value.PositionMS || !got[i].Value.EventTime.Equal(want[i].Value.EventTime) {
			t.Fatalf("entry %d: read %+v, want %+v", i, got[i], want[i])
		}
	}

	codec := playback.SpillCodec{}
	for name, e := range map[string]buffer.Entry[playback.Key, playback.Position]{
		"member 0":          {Key: playback.Key{Member: 0, Media: 1}, Value: playback.Position{EventTime: at}},
		"negative position": {Key: playback.Key{Member: 1, Media: 1}, Value: playback.Position{PositionMS: -1, EventTime: at}},
		"no event time":     {Key: playback.Key{Member: 1, Media: 1}, Value: playback.Position{EventTime: time.Unix(0, 0)}},
	} {
		if _, err := codec.DecodeEntry(codec.AppendEntry(nil, e)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, err := codec.DecodeEntry(make([]byte, 27)); err == nil {
		t.Error("a short record decoded without error")
	}
}

// A spill file is replayed through the checks a PUT passed when the position arrived: a file
// with a valid checksum may have been planted or changed by someone who could write to the
// directory. A position past the media's end, an event time far ahead (it would
// win the event-time guard against every later report), a media the member may not play and
// one that does not exist are each refused and counted; the honest records of the same file
// are stored, a record a little ahead of the clock (another node's) among them.
func TestReplayCheck_RefusesWhatThePUTWouldHave(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	lesson := b.createMedia(t, map[string]any{"title": "lesson", "duration_ms": 60_000})
	private := b.createMedia(t, map[string]any{"title": "private", "duration_ms": 60_000, "visibility": "PRIVATE", "owner_id": 99})
	now := time.Now().UTC().Truncate(time.Microsecond)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	type record struct {
		member, media int64
		positionMS    int32
		eventTime     time.Time
		stored        bool
	}
	records := []record{
		{member: 1, media: lesson, positionMS: 30_000, eventTime: at(-time.Minute), stored: true},
		{member: 2, media: lesson, positionMS: 60_000, eventTime: at(30 * time.Second), stored: true}, // at the end; a clock 30 s ahead
		{member: 3, media: lesson, positionMS: 60_001, eventTime: at(-time.Minute)},                   // past the end
		{member: 4, media: lesson, positionMS: 2_000_000_000, eventTime: at(-time.Minute)},            // far past the end
		{member: 5, media: lesson, positionMS: 1_000, eventTime: at(24 * time.Hour)},                  // would freeze the position
		{member: 6, media: private, positionMS: 1_000, eventTime: at(-time.Minute)},                   // another member's private media
		{member: 99, media: private, positionMS: 1_000, eventTime: at(-time.Minute), stored: true},    // its owner
		{member: 7, media: private + 1000, positionMS: 1_000, eventTime: at(-time.Minute)},            // no such media

		// The skew's edge, as documented (1 minute, not whatever MaxReplayClockSkew says): exactly
		// as far ahead as allowed, and a second more.
		{member: 8, media: lesson, positionMS: 1_000, eventTime: at(time.Minute), stored: true},
		{member: 9, media: lesson, positionMS: 1_000, eventTime: at(time.Minute + time.Second)},
	}
	entries := make([]buffer.Entry[playback.Key, playback.Position], 0, len(records))
	for _, r := range records {
		entries = append(entries, buffer.Entry[playback.Key, playback.Position]{
			Key: playback.Key{Member: r.member, Media: r.media}, Value: playback.Position{PositionMS: r.positionMS, EventTime: r.eventTime}})
	}
	dir := t.TempDir()
	spill, err := buffer.NewSpillDir[playback.Key, playback.Position](dir, "playback", playback.SpillCodec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spill.Write(entries); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	replaying, err := buffer.New(buffer.Config[playback.Key, playback.Position]{
		FlushInterval: time.Hour, Flush: b.store.Flush, Compare: playback.CompareKeys, Newer: playback.Newer,
		Spill: spill, CheckReplayed: playback.ReplayCheck(b.cache, func() time.Time { return now }),
		Metrics: buffer.NewMetrics(reg, "replay")})
	if err != nil {
		t.Fatal(err)
	}
	if err := replaying.Start(context.Background()); err != nil {
		t.Fatalf("Start = %v, want the file replayed", err)
	}
	t.Cleanup(func() { _ = replaying.Stop(context.Background()) })

	refused := 0
	for _, r := range records {
		n := b.count(t, `SELECT count(*) FROM playback WHERE member_id = $1 AND media_id = $2`, r.member, r.media)
		if r.stored != (n == 1) {
			t.Errorf("member %d, media %d, position %d ms, event time %s: %d rows stored, want stored=%v",
				r.member, r.media, r.positionMS, r.eventTime.Sub(now), n, r.stored)
		}
		if !r.stored {
			refused++
		}
	}
	if lost := replaying.Stats().Lost["bad_row"]; lost != int64(refused) {
		t.Errorf("lost bad rows = %d, want the %d refused records", lost, refused)
	}
	if files, err := spill.Files(); err != nil || len(files) != 0 {
		t.Errorf("spill files after the replay = %v, %v; want the file removed", files, err)
	}
}
