package playback_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
