// Package storage keeps media objects (uploads, HLS outputs, thumbnails) under string keys
// such as "hls/42/<claim token>/master.m3u8". Two backends implement Store: Local, a directory
// (the embedded default for one machine), and S3, a bucket of any S3-compatible object store
// (the shape for many nodes, which then share nothing but the database and the bucket). The
// same conformance suite runs against both (conformance_test.go).
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Store is an object store. Keys are slash-separated relative paths. A prefix names a folder:
// it ends in "/" (one is added when it does not), so "hls/4/" never covers "hls/42/…".
type Store interface {
	// Put streams r into key, replacing any object there, and returns the bytes written.
	// A failed Put leaves no object behind.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open reads key. A missing key is an error wrapping fs.ErrNotExist.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// DeletePrefix removes every object under prefix ("hls/42/token/"). A prefix with nothing
	// under it is not an error.
	DeletePrefix(ctx context.Context, prefix string) error
	// Children lists the names one level below prefix ("hls/42/" → the claim tokens).
	Children(ctx context.Context, prefix string) ([]string, error)
	// List yields every object under prefix ("" for all) whose key sorts after after, in key
	// order (byte-wise, as S3 lists), so that a long listing can stop and resume where it
	// stopped. An error ends the listing.
	List(ctx context.Context, prefix, after string) iter.Seq2[Object, error]
}

// Object is one stored object as List sees it.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Presigner is a Store whose objects a client can fetch straight from the store, with a URL
// that is valid for ttl and for that one object only (an S3 presigned GET). Playhead's own
// object server signs its URLs itself (media.Signer); a Store that is not a Presigner is
// served through it.
type Presigner interface {
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// UnfinishedWrites is a Store that can hold the parts of writes that never finished (S3
// multipart uploads of a process killed mid-upload, of a resumable upload abandoned). They are
// no objects, List does not show them, and they cost storage until aborted.
type UnfinishedWrites interface {
	// Unfinished yields the unfinished writes under prefix started before olderThan. An error
	// ends the listing.
	Unfinished(ctx context.Context, prefix string, olderThan time.Time) iter.Seq2[UnfinishedWrite, error]
	// AbortWrite aborts w: its parts are deleted. One that is gone already is not an error.
	AbortWrite(ctx context.Context, w UnfinishedWrite) error
}

// UnfinishedWrite is one write that never finished.
type UnfinishedWrite struct {
	Key string
	// ID is the store's name of the write (an S3 upload id).
	ID      string
	Started time.Time
}

// ErrBadKey is returned for keys that are empty, absolute or climb out with "..".
var ErrBadKey = errors.New("storage: bad key")

// CheckEndpoint validates an S3 endpoint: http(s)://host[:port], with no path, user or query
// (a bucket or a credential in it would be a mistake the requests make silently).
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("storage: %q is not an S3 endpoint, http(s)://host[:port]", endpoint)
	}
	return nil
}

// CheckKey validates key.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || path.Clean(key) != strings.TrimSuffix(key, "/") ||
		key == ".." || strings.HasPrefix(key, "../") {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	return nil
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

// folder returns prefix as a folder, ending in "/", after checking it.
func folder(prefix string) (string, error) {
	if err := CheckKey(prefix); err != nil {
		return "", err
	}
	return strings.TrimSuffix(prefix, "/") + "/", nil
}

// checkListPrefix validates List's prefix: empty (everything) or a folder.
func checkListPrefix(prefix string) (string, error) {
	if prefix == "" {
		return "", nil
	}
	return folder(prefix)
}

// contentTypes are the types of the files an encode writes, stored with each object so that a
// player fetching it straight from the store gets the right one.
var contentTypes = map[string]string{
	".m3u8": "application/vnd.apple.mpegurl",
	".ts":   "video/mp2t",
	".jpg":  "image/jpeg",
}

// ContentType is the type of the object at key by its extension; application/octet-stream for
// anything but the files an encode writes.
func ContentType(key string) string {
	if t, ok := contentTypes[path.Ext(key)]; ok {
		return t
	}
	return "application/octet-stream"
}
