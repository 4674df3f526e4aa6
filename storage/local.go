package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Local stores objects as files under a root directory.
type Local struct {
	root string
}

// NewLocal returns a Local rooted at dir, creating it if needed.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("storage dir: %w", err)
	}
	return &Local{root: abs}, nil
}

func (l *Local) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file beside the target and renames it into place, so readers
// never see half an object and a failed write leaves nothing.
func (l *Local) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	p, err := l.path(key)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	n, err := io.Copy(tmp, contextReader{ctx: ctx, r: r})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	return n, nil
}

// Open opens key for reading. It never leaves the root: a symbolic link inside the store that
// points outside it is refused (os.OpenInRoot), so a stray link cannot make the object server
// read the host's files. Only regular files are objects; a directory is not found.
func (l *Local) Open(_ context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	f, err := os.OpenInRoot(l.root, filepath.FromSlash(key))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, notFoundUnlessSystem(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: not a regular file", fs.ErrNotExist)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	return f, nil
}

// DeletePrefix removes the directory of prefix. A missing prefix is not an error.
func (l *Local) DeletePrefix(_ context.Context, prefix string) error {
	p, err := l.path(prefix)
	if err != nil {
		return err
	}
	if p == l.root {
		return fmt.Errorf("%w: refusing to delete the whole store", ErrBadKey)
	}
	if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	return nil
}

// Children lists the entries directly under prefix; a missing prefix has none.
func (l *Local) Children(_ context.Context, prefix string) ([]string, error) {
	p, err := l.path(prefix)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".put-") { // a Put in progress is not an object yet
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// notFoundUnlessSystem turns the refusals of a path into fs.ErrNotExist — the root's own (a
// link that escapes the store) and the system's for a name that cannot be an object (a file
// used as a directory, a link loop, a name too long) — and keeps the errors of a failing
// system (too many open files, I/O): to a reader, an object outside the store does not exist.
func notFoundUnlessSystem(err error) error {
	errno, ok := errors.AsType[syscall.Errno](err)
	if ok && errno != syscall.ENOTDIR && errno != syscall.ELOOP && errno != syscall.ENAMETOOLONG {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
}

// List walks the directory of prefix in key order. Directories are visited as their keys sort
// ("a/" after "a.b", before "a0"), not in os.ReadDir's name order, so that resuming after a key
// skips exactly what was listed. Unfinished writes (.put-* files of a process that died
// mid-Put) are listed: they take space, and belong to the folder they are in. Symbolic links
// are not objects and are skipped.
func (l *Local) List(ctx context.Context, prefix, after string) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		prefix, err := checkListPrefix(prefix)
		if err != nil {
			yield(Object{}, err)
			return
		}
		dir := filepath.Join(l.root, filepath.FromSlash(prefix))
		l.walk(ctx, dir, prefix, after, yield)
	}
}

// walk lists dir, whose objects' keys start with keyPrefix; false means stop.
func (l *Local) walk(ctx context.Context, dir, keyPrefix, after string, yield func(Object, error) bool) bool {
	if err := ctx.Err(); err != nil {
		return yield(Object{}, err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return yield(Object{}, fmt.Errorf("list %s: %w", keyPrefix, err))
	}
	sortKey := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return cmp.Compare(sortKey(a), sortKey(b)) })
	for _, e := range entries {
		key := keyPrefix + sortKey(e)
		switch {
		case e.IsDir():
			// Every key under it starts with key: the whole folder sorts before after unless
			// after is inside it.
			if key < after && !strings.HasPrefix(after, key) {
				continue
			}
			if !l.walk(ctx, filepath.Join(dir, e.Name()), key, after, yield) {
				return false
			}
		case e.Type().IsRegular() && key > after:
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since ReadDir
			}
			if err != nil {
				return yield(Object{}, fmt.Errorf("list %s: %w", key, err))
			}
			if !yield(Object{Key: key, Size: info.Size(), ModTime: info.ModTime()}, nil) {
				return false
			}
		}
	}
	return true
}
