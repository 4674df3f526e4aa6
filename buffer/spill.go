package buffer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrCorruptSpill is wrapped by ReadSpillFile's error when a file is not a complete spill file:
// truncated, damaged, or not one at all.
var ErrCorruptSpill = errors.New("buffer: corrupt spill file")

// Codec encodes one entry as a spill record and decodes it back. A record is never empty.
type Codec[K comparable, V any] interface {
	AppendEntry(dst []byte, e Entry[K, V]) []byte
	DecodeEntry(record []byte) (Entry[K, V], error)
}

// SpillDir keeps, as files in one directory, what a buffer could not write before its stop
// deadline, and hands them back at the next Start.
//
// A file is written under a temporary name, synced, renamed to NAME-TIME-PID.spill and the
// directory synced, so a complete name always holds a complete file. Its format:
//
//	"PHSPILL1"                                       magic, 8 bytes
//	{ uint32 length (1 … 64 KiB), record }*          one record per entry (Codec)
//	uint32 0, uint64 record count                    end marker
//	uint32 CRC-32C of every byte before it
//
// (integers big-endian). A file cut short anywhere, or with any byte changed, fails the end
// marker, the count or the checksum, and is reported as corrupt instead of being half applied.
type SpillDir[K comparable, V any] struct {
	dir, name string
	codec     Codec[K, V]
}

const (
	spillMagic     = "PHSPILL1"
	spillSuffix    = ".spill"
	spillTmpSuffix = ".spill.tmp"
	corruptSuffix  = ".corrupt"
	maxSpillRecord = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewSpillDir returns the spill directory dir for the buffer called name (files are named
// after it, so buffers can share a directory). It creates dir and checks that files can be
// created in it, so a bad directory fails the start, not the stop.
func NewSpillDir[K comparable, V any](dir, name string, codec Codec[K, V]) (*SpillDir[K, V], error) {
	if dir == "" || name == "" || strings.ContainsAny(name, `/\`) || codec == nil {
		return nil, errors.New("buffer: spill directory needs a path, a plain name and a codec")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create spill directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	if err := checkNotShared(dir, info); err != nil {
		return nil, err
	}
	probe, err := os.CreateTemp(dir, "."+name+"-probe-*"+spillTmpSuffix)
	if err != nil {
		return nil, fmt.Errorf("spill directory is not writable: %w", err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	return &SpillDir[K, V]{dir: dir, name: name, codec: codec}, nil
}

// checkNotShared refuses a spill directory or file that users other than its owner (and its
// group, for a directory's reading) may write, or that is owned by a user other than this
// process's or root: Start replays whatever valid file the directory holds, so a directory
// others can write would let any local user plant positions, the way a world-writable ~/.ssh
// lets anyone plant keys (and sshd refuses it). The owner counts because it may write
// whatever the mode says, and a process running as root can write into a directory another
// user made, so the mode alone passed a 0755 directory that user had prepared.
func checkNotShared(path string, info os.FileInfo) error {
	what := "file"
	if info.IsDir() {
		what = "directory"
	}
	if uid, ok := owner(info); ok && uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("spill %s %s is owned by user id %d, not by this process's user (%d) or root: its owner can "+
			"plant positions that are replayed at the next start; give it to this user (chown)", what, path, uid, os.Geteuid())
	}
	mode := info.Mode().Perm()
	if mode&0o022 == 0 {
		return nil
	}
	return fmt.Errorf("spill %s %s is writable by its group or by others (mode %04o): anyone who can write there can "+
		"plant positions that are replayed at the next start; remove that permission (chmod go-w)", what, path, mode)
}

// Write stores entries in a new spill file and returns its path. The file is durable (synced,
// renamed, directory synced) when Write returns nil.
func (d *SpillDir[K, V]) Write(entries []Entry[K, V]) (path string, err error) {
	tmp, err := os.CreateTemp(d.dir, "."+d.name+"-*"+spillTmpSuffix)
	if err != nil {
		return "", fmt.Errorf("create spill file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	sum := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, sum), 64<<10)
	w.WriteString(spillMagic)
	var scratch, record []byte
	for _, e := range entries {
		record = d.codec.AppendEntry(record[:0], e)
		if len(record) == 0 || len(record) > maxSpillRecord {
			return "", fmt.Errorf("spill record of %d bytes for key %v: must be 1 to %d", len(record), e.Key, maxSpillRecord)
		}
		w.Write(binary.BigEndian.AppendUint32(scratch[:0], uint32(len(record))))
		w.Write(record)
	}
	scratch = binary.BigEndian.AppendUint32(scratch[:0], 0)
	w.Write(binary.BigEndian.AppendUint64(scratch, uint64(len(entries))))
	if err := w.Flush(); err != nil { // bufio keeps the first write error and returns it here
		return "", fmt.Errorf("write spill file: %w", err)
	}
	if _, err := tmp.Write(binary.BigEndian.AppendUint32(nil, sum.Sum32())); err != nil {
		return "", fmt.Errorf("write spill file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("sync spill file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("close spill file: %w", err)
	}
	path = filepath.Join(d.dir, fmt.Sprintf("%s-%s-%d%s", d.name, time.Now().UTC().Format("20060102T150405.000000000Z"), os.Getpid(), spillSuffix))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("rename spill file: %w", err)
	}
	if err := syncDir(d.dir); err != nil {
		return path, fmt.Errorf("sync spill directory: %w", err)
	}
	return path, nil
}

// Files returns the complete spill files of this buffer, oldest first. Temporary files of a
// write that never finished are not among them.
func (d *SpillDir[K, V]) Files() ([]string, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("list spill directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, d.name+"-") && strings.HasSuffix(n, spillSuffix) {
			files = append(files, filepath.Join(d.dir, n))
		}
	}
	slices.Sort(files) // the names carry the UTC time they were written
	return files, nil
}

// ReadSpillFile reads a whole spill file. Nothing is returned unless the entire file checks
// out; a file that does not is reported with an error wrapping ErrCorruptSpill. A file that
// users other than its owner may write is refused with another error (see checkNotShared).
func ReadSpillFile[K comparable, V any](path string, codec Codec[K, V]) ([]Entry[K, V], error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkNotShared(path, info); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	sum := crc32.New(castagnoli)
	hashed := io.TeeReader(r, sum)
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrCorruptSpill, path, fmt.Sprintf(format, args...))
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(hashed, buf); err != nil || string(buf) != spillMagic {
		return nil, corrupt("no spill header")
	}
	var entries []Entry[K, V]
	record := make([]byte, 0, 64)
	for {
		if _, err := io.ReadFull(hashed, buf[:4]); err != nil {
			return nil, corrupt("truncated after %d records (no end marker)", len(entries))
		}
		n := binary.BigEndian.Uint32(buf[:4])
		if n == 0 {
			break
		}
		if n > maxSpillRecord {
			return nil, corrupt("record %d claims %d bytes", len(entries)+1, n)
		}
		record = slices.Grow(record[:0], int(n))[:n]
		if _, err := io.ReadFull(hashed, record); err != nil {
			return nil, corrupt("truncated in record %d", len(entries)+1)
		}
		e, err := codec.DecodeEntry(record)
		if err != nil {
			return nil, corrupt("record %d: %v", len(entries)+1, err)
		}
		entries = append(entries, e)
	}
	if _, err := io.ReadFull(hashed, buf[:8]); err != nil {
		return nil, corrupt("truncated in the end marker")
	}
	if count := binary.BigEndian.Uint64(buf[:8]); count != uint64(len(entries)) {
		return nil, corrupt("end marker counts %d records, file has %d", count, len(entries))
	}
	want := sum.Sum32()
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, corrupt("truncated before the checksum")
	}
	if got := binary.BigEndian.Uint32(buf[:4]); got != want {
		return nil, corrupt("checksum %08x, content sums to %08x", got, want)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, corrupt("data after the checksum")
	}
	return entries, nil
}

// moveAside renames a corrupt file to NAME.corrupt, out of the replay's way but kept for a
// human to look at.
func (d *SpillDir[K, V]) moveAside(path string) (string, error) {
	aside := path + corruptSuffix
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, syncDir(d.dir)
}

// remove deletes a replayed file.
func (d *SpillDir[K, V]) remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) { // another node sharing the directory replayed it too
		return err
	}
	return syncDir(d.dir)
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
