package storage

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// StartParts starts a multipart upload at key.
func (s *S3) StartParts(ctx context.Context, key string) (string, error) {
	name, err := s.name(key)
	if err != nil {
		return "", err
	}
	id, err := s.core().NewMultipartUpload(ctx, s.bucket, name, minio.PutObjectOptions{ContentType: ContentType(key)})
	if err != nil {
		return "", fmt.Errorf("start %s: %s", key, describeS3(err))
	}
	return id, nil
}

// PutPart uploads part n in one request. r should be an io.Seeker (a part held in memory), so
// that minio-go can send it again when it retries a throttled or failed request.
func (s *S3) PutPart(ctx context.Context, key, id string, n int, r io.Reader, size int64) (Part, error) {
	name, err := s.name(key)
	if err != nil {
		return Part{}, err
	}
	if n < 1 || n > MaxParts {
		return Part{}, fmt.Errorf("put part %d of %s: part numbers are 1 to %d", n, key, MaxParts)
	}
	p, err := s.core().PutObjectPart(ctx, s.bucket, name, id, n, r, size, minio.PutObjectPartOptions{})
	if err != nil {
		return Part{}, fmt.Errorf("put part %d of %s: %s", n, key, describeS3(err))
	}
	return Part{Number: n, ETag: p.ETag, Size: size}, nil
}

// CompleteParts completes the multipart upload with parts. The store checks each part's ETag:
// a part number written again since its Part was taken fails the completion rather than
// putting other bytes in the object.
func (s *S3) CompleteParts(ctx context.Context, key, id string, parts []Part) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	complete := make([]minio.CompletePart, len(parts))
	for i, p := range parts {
		complete[i] = minio.CompletePart{PartNumber: p.Number, ETag: p.ETag}
	}
	if _, err := s.core().CompleteMultipartUpload(ctx, s.bucket, name, id, complete, minio.PutObjectOptions{ContentType: ContentType(key)}); err != nil {
		return fmt.Errorf("complete %s: %s", key, describeS3(err))
	}
	return nil
}

// AbortParts aborts the multipart upload; one that does not exist (aborted or completed
// already) is not an error.
func (s *S3) AbortParts(ctx context.Context, key, id string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	if err := s.core().AbortMultipartUpload(ctx, s.bucket, name, id); err != nil {
		if resp := minio.ToErrorResponse(err); resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchUpload" {
			return nil
		}
		return fmt.Errorf("abort %s: %s", key, describeS3(err))
	}
	return nil
}

// Unfinished lists the multipart uploads under prefix initiated before olderThan.
func (s *S3) Unfinished(ctx context.Context, prefix string, olderThan time.Time) iter.Seq2[UnfinishedWrite, error] {
	return func(yield func(UnfinishedWrite, error) bool) {
		p, err := checkListPrefix(prefix)
		if err != nil {
			yield(UnfinishedWrite{}, err)
			return
		}
		// The listing's goroutine stops when this context ends: on an early return too.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for up := range s.client.ListIncompleteUploads(ctx, s.bucket, s.prefix+p, true) {
			if up.Err != nil {
				yield(UnfinishedWrite{}, fmt.Errorf("list unfinished uploads under %q: %s", prefix, describeS3(up.Err)))
				return
			}
			if !up.Initiated.Before(olderThan) {
				continue
			}
			if !yield(UnfinishedWrite{Key: strings.TrimPrefix(up.Key, s.prefix), ID: up.UploadID, Started: up.Initiated}, nil) {
				return
			}
		}
	}
}

// AbortWrite aborts one unfinished multipart upload.
func (s *S3) AbortWrite(ctx context.Context, w UnfinishedWrite) error {
	return s.AbortParts(ctx, w.Key, w.ID)
}

func (s *S3) core() minio.Core { return minio.Core{Client: s.client} }
