// Package storage keeps media objects (uploads, HLS outputs, thumbnails) under string keys
// such as "hls/42/<claim token>/master.m3u8". Local is the default backend: a directory.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Store is an object store. Keys are slash-separated relative paths.
type Store interface {
	// Put streams r into key, replacing any object there, and returns the bytes written.
	// A failed Put leaves no object behind.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open reads key. A missing key is an error wrapping fs.ErrNotExist.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// DeletePrefix removes every object under prefix ("hls/42/token/").
	DeletePrefix(ctx context.Context, prefix string) error
	// Children lists the names one level below prefix ("hls/42/" → the claim tokens).
	Children(ctx context.Context, prefix string) ([]string, error)
}

// ErrBadKey is returned for keys that are empty, absolute or climb out with "..".
var ErrBadKey = errors.New("storage: bad key")

// CheckKey validates key.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || path.Clean(key) != strings.TrimSuffix(key, "/") ||
		key == ".." || strings.HasPrefix(key, "../") {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	return nil
}

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

// contextReader stops a long copy when its context is cancelled.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// PutFile uploads the local file at src to key.
func PutFile(ctx context.Context, s Store, key, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = s.Put(ctx, key, f)
	return err
}

// PutDir uploads every file under dir to prefix + its relative path.
func PutDir(ctx context.Context, s Store, prefix, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return PutFile(ctx, s, path.Join(prefix, filepath.ToSlash(rel)), p)
	})
}
