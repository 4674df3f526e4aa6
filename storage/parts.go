package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Parts is a Store that can assemble one object from parts written at different times, by
// different requests and processes: what a resumable upload needs, since each of its requests
// may land on another node. With S3 the parts are a multipart upload's; with Local they are
// files beside the object. The writer keeps the list of the parts it wrote (their Part values)
// and hands it to CompleteParts; the store keeps no index of its own.
//
// Every part but the last must be at least MinPartSize bytes (S3's rule), and a part, once
// written, is never changed: writing part n again gives a Part with another ETag, and
// CompleteParts takes the one it is given. So two writers that race on an upload cannot mix
// their bytes into one part; whichever list of parts is completed wins whole.
type Parts interface {
	// StartParts begins an object at key made of parts and returns the write's id.
	StartParts(ctx context.Context, key string) (id string, err error)
	// PutPart stores size bytes of r as part number n (1 … MaxParts) of write id.
	PutPart(ctx context.Context, key, id string, n int, r io.Reader, size int64) (Part, error)
	// CompleteParts makes the object key of parts, in order, and removes the write's parts.
	CompleteParts(ctx context.Context, key, id string, parts []Part) error
	// AbortParts removes write id and every part of it. A write that is gone is not an error.
	AbortParts(ctx context.Context, key, id string) error
}

// Part is one stored part of a write, as PutPart returns it.
type Part struct {
	Number int    `json:"n"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
}

// MinPartSize is the smallest size of a part that is not a write's last (S3's 5 MiB), and
// MaxParts the most parts one write may have.
const (
	MinPartSize = 5 << 20
	MaxParts    = 10_000
)

// ErrPartSize is returned when a part is not of the size announced.
var ErrPartSize = errors.New("storage: part shorter or longer than its size")

// Local keeps the parts of write id of key in a hidden folder beside key, .parts-{id}/, one
// file a part named {n}-{random}: a part written twice is two files, and CompleteParts copies
// the ones it is given into key (with copy_file_range: the kernel copies, on file systems that
// can it shares the blocks). The folder is under key's group, so the orphan sweep removes the
// parts of an abandoned write with the rest of the group.

func (l *Local) partsDir(key, id string) (string, error) {
	p, err := l.path(key)
	if err != nil {
		return "", err
	}
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return "", fmt.Errorf("%w: write id %q", ErrBadKey, id)
	}
	return filepath.Join(filepath.Dir(p), ".parts-"+id), nil
}

// StartParts returns a new write id; nothing is stored until the first part.
func (l *Local) StartParts(_ context.Context, key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return randomName(), nil
}

// PutPart writes the part to a temporary file in the write's folder and renames it into place.
func (l *Local) PutPart(ctx context.Context, key, id string, n int, r io.Reader, size int64) (Part, error) {
	dir, err := l.partsDir(key, id)
	if err != nil {
		return Part{}, err
	}
	if n < 1 || n > MaxParts {
		return Part{}, fmt.Errorf("put part %d of %s: part numbers are 1 to %d", n, key, MaxParts)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Part{}, fmt.Errorf("put part %d of %s: %w", n, key, err)
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return Part{}, fmt.Errorf("put part %d of %s: %w", n, key, err)
	}
	written, err := io.Copy(tmp, io.LimitReader(contextReader{ctx: ctx, r: r}, size+1))
	if err == nil && written != size {
		err = fmt.Errorf("%w: %d bytes, want %d", ErrPartSize, written, size)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	name := strconv.Itoa(n) + "-" + randomName()
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return Part{}, fmt.Errorf("put part %d of %s: %w", n, key, err)
	}
	return Part{Number: n, ETag: name, Size: size}, nil
}

// CompleteParts copies the parts into a temporary file beside key, renames it into place
// (readers never see half an object) and removes the write's folder.
func (l *Local) CompleteParts(ctx context.Context, key, id string, parts []Part) error {
	dir, err := l.partsDir(key, id)
	if err != nil {
		return err
	}
	p, _ := l.path(key)
	tmp, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return fmt.Errorf("complete %s: %w", key, err)
	}
	err = l.concat(ctx, tmp, dir, parts)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("complete %s: %w", key, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("complete %s: remove its parts: %w", key, err)
	}
	return nil
}

func (l *Local) concat(ctx context.Context, dst *os.File, dir string, parts []Part) error {
	for _, part := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if part.ETag == "" || strings.ContainsAny(part.ETag, `/\`) || strings.HasPrefix(part.ETag, ".") {
			return fmt.Errorf("%w: part %q", ErrBadKey, part.ETag)
		}
		src, err := os.Open(filepath.Join(dir, part.ETag))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("part %d (%s): %w", part.Number, part.ETag, err)
		}
		if err != nil {
			return err
		}
		// *os.File to *os.File: io.Copy uses copy_file_range, no bytes through user space.
		n, err := io.Copy(dst, src)
		src.Close()
		if err == nil && n != part.Size {
			err = fmt.Errorf("%w: part %d holds %d bytes, want %d", ErrPartSize, part.Number, n, part.Size)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// AbortParts removes the write's folder.
func (l *Local) AbortParts(_ context.Context, key, id string) error {
	dir, err := l.partsDir(key, id)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("abort %s: %w", key, err)
	}
	return nil
}

func randomName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
