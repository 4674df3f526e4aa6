package buffer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/buffer"
)

// newChecked returns a buffer replaying dir through check, not started.
func newChecked(t *testing.T, dir string, flush buffer.FlushFunc[int, val], check func(context.Context, buffer.Entry[int, val]) error) *buffer.Buffer[int, val] {
	t.Helper()
	b, err := buffer.New(fastRetry(buffer.Config[int, val]{Flush: flush, Compare: func(a, b int) int { return a - b }, Newer: newer,
		Spill: spillDir(t, dir), CheckReplayed: check, Metrics: buffer.NewMetrics(prometheus.NewRegistry(), "test")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b
}

// Entries the check refuses are dropped and counted as bad rows; the rest of the file is
// written and the file removed.
func TestBuffer_ReplayDropsWhatTheCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{
		{Key: 1, Value: val{n: 1, at: 1}}, {Key: 2, Value: val{n: -1, at: 1}}, {Key: 3, Value: val{n: 3, at: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	rec := &flaky{}
	b := newChecked(t, dir, rec.flush, func(_ context.Context, e buffer.Entry[int, val]) error {
		if e.Value.n < 0 {
			return buffer.Rejected(errors.New("negative"))
		}
		return nil
	})
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); len(got) != 2 || got[1] != (val{n: 1, at: 1}) || got[3] != (val{n: 3, at: 1}) {
		t.Fatalf("written %v, want keys 1 and 3 only", got)
	}
	if lost := b.Stats().Lost["bad_row"]; lost != 1 {
		t.Fatalf("lost bad rows = %d, want 1", lost)
	}
	if files := spillFiles(t, dir); len(files) != 0 {
		t.Fatalf("spill files left: %v", files)
	}
}

// A check that cannot answer (the database behind it is away) is not the entry's fault: the
// start fails, nothing is dropped, and the file stays for the next start, which replays it.
func TestBuffer_ReplayKeepsTheFileWhenTheCheckCannotAnswer(t *testing.T) {
	dir := t.TempDir()
	if _, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}, {Key: 2, Value: val{n: 2, at: 1}}}); err != nil {
		t.Fatal(err)
	}
	var away atomic.Bool
	away.Store(true)
	check := func(context.Context, buffer.Entry[int, val]) error {
		if away.Load() {
			return errDown
		}
		return nil
	}
	rec := &flaky{}
	if err := newChecked(t, dir, rec.flush, check).Start(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("Start with the check failing = %v, want the check's error", err)
	}
	if len(rec.last()) != 0 || len(spillFiles(t, dir)) != 1 {
		t.Fatalf("written %v, files %v; want nothing written and the file kept", rec.last(), spillFiles(t, dir))
	}
	away.Store(false)
	if err := newChecked(t, dir, rec.flush, check).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); len(got) != 2 || len(spillFiles(t, dir)) != 0 {
		t.Fatalf("written %v, files %v; want both entries and no file", got, spillFiles(t, dir))
	}
}

// A spill directory that users other than its owner may write is refused when the buffer is
// built, and a spill file they may write is not replayed: whoever can write there could plant
// positions.
func TestSpillDir_RefusesWhatOthersCanWrite(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702, 0o1777} {
		dir := filepath.Join(t.TempDir(), "spill")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		_, err := buffer.NewSpillDir[int, val](dir, "test", valCodec{})
		if err == nil || !strings.Contains(err.Error(), "writable by its group or by others") {
			t.Errorf("NewSpillDir on a directory of mode %04o = %v, want it refused", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o700, 0o750, 0o755} {
		dir := filepath.Join(t.TempDir(), "spill")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := buffer.NewSpillDir[int, val](dir, "test", valCodec{}); err != nil {
			t.Errorf("NewSpillDir on a directory of mode %04o = %v, want it taken", mode, err)
		}
	}

	dir := t.TempDir()
	path, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	rec := &flaky{}
	if err := newChecked(t, dir, rec.flush, nil).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.last()) != 0 || len(spillFiles(t, dir)) != 1 {
		t.Fatalf("a spill file of mode 0666: written %v, files %v; want it left in place, not replayed", rec.last(), spillFiles(t, dir))
	}
}

// A spill directory or file owned by another user is refused like one others may write: its
// owner can write there whatever its mode says. A process running as root can write into any
// directory, so a directory another local user made beforehand (0755, theirs) would pass the
// mode check, and the buffer would take that user's planted files. Root's own files are
// trusted.
// Run as root only: changing a file's owner needs it.
func TestSpillDir_RefusesWhatAnotherUserOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	const nobody = 65534
	dir := filepath.Join(t.TempDir(), "spill")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := buffer.NewSpillDir[int, val](dir, "test", valCodec{}); err == nil || !strings.Contains(err.Error(), "owned by") {
		t.Errorf("NewSpillDir on a directory of mode 0755 owned by uid %d = %v, want it refused", nobody, err)
	}

	dir = t.TempDir()
	path, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	rec := &flaky{}
	if err := newChecked(t, dir, rec.flush, nil).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.last()) != 0 || len(spillFiles(t, dir)) != 1 {
		t.Fatalf("a spill file of mode 0644 owned by uid %d: written %v, files %v; want it left in place, not replayed", nobody, rec.last(), spillFiles(t, dir))
	}
}
