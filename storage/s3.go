package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config configures an S3 store. Zero values take the defaults named on each field.
type S3Config struct {
	// Endpoint is the store's URL: https://s3.eu-west-1.amazonaws.com, http://127.0.0.1:8333.
	// Default https://s3.amazonaws.com.
	Endpoint string
	// Region is the bucket's region, also used to sign. Default us-east-1.
	Region string
	// Bucket must exist: NewS3 checks it and says so when it does not.
	Bucket string
	// AccessKeyID and SecretAccessKey are the credentials. The secret is never logged or shown
	// in an error.
	AccessKeyID, SecretAccessKey string
	// PathStyle addresses the bucket as endpoint/bucket/key (most self-hosted stores) rather
	// than bucket.endpoint/key (AWS's virtual-hosted style).
	PathStyle bool
	// Prefix is put before every key, so one bucket can hold several deployments ("prod/").
	Prefix string
	// Transport carries the requests. Default: an http.Transport with the timeouts below.
	Transport http.RoundTripper
}

// S3 stores objects in a bucket of an S3-compatible object store.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string
}

// s3PartSize is the part size of uploads whose size is not known in advance (an upload streamed
// from a client): minio-go holds one part in memory per upload, so it bounds the heap an upload
// costs. Without it minio-go picks 5 TiB / 10 000 parts, about 512 MiB held per upload. 8 MiB
// parts take objects up to 78 GiB (S3 allows 10 000 parts), far above PLAYHEAD_MAX_UPLOAD_BYTES.
const s3PartSize = 8 << 20

// The transport's timeouts: they bound each request's set-up and its wait for an answer; a
// long transfer is bounded by its caller's context. minio-go retries throttling (503 SlowDown)
// and 5xx answers itself, with backoff, up to 10 times.
const (
	s3DialTimeout     = 10 * time.Second
	s3HeaderTimeout   = 60 * time.Second // completing a large multipart upload can take a while
	s3IdleConnTimeout = 90 * time.Second
)

// NewS3 connects to the store and checks that the bucket exists and the credentials may read
// it, so that a misconfigured node stops at start-up with an error that says which.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = "https://s3.amazonaws.com"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("s3 endpoint %q: want http(s)://host[:port], nothing after it", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	prefix := ""
	if cfg.Prefix != "" {
		if prefix, err = folder(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3 prefix: %w", err)
		}
	}
	transport := cfg.Transport
	if transport == nil {
		transport = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: s3DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   s3DialTimeout,
			ResponseHeaderTimeout: s3HeaderTimeout,
			ExpectContinueTimeout: time.Second,
			IdleConnTimeout:       s3IdleConnTimeout,
			MaxIdleConnsPerHost:   64,
		}
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure:       u.Scheme == "https",
		Region:       cfg.Region, // set, so minio-go never asks the store for the bucket's location
		BucketLookup: lookup,
		Transport:    transport,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	s := &S3{client: client, bucket: cfg.Bucket, prefix: prefix}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	exists, err := client.BucketExists(checkCtx, cfg.Bucket)
	switch {
	case err != nil:
		return nil, fmt.Errorf("s3: cannot reach bucket %q at %s: %s", cfg.Bucket, cfg.Endpoint, describeS3(err))
	case !exists:
		return nil, fmt.Errorf("s3: bucket %q does not exist at %s: create it first (Playhead never creates buckets)", cfg.Bucket, cfg.Endpoint)
	}
	return s, nil
}

// describeS3 words an S3 error: its code and message, which never carry the credentials.
func describeS3(err error) string {
	resp := minio.ToErrorResponse(err)
	if resp.Code == "" {
		return err.Error()
	}
	return fmt.Sprintf("%s (HTTP %d): %s", resp.Code, resp.StatusCode, resp.Message)
}

func (s *S3) name(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// Put uploads r. A file (the encoder's outputs, a download) and bytes in memory (a reader that
// tells what it has left: bytes.Reader, strings.Reader) have a known size and go up in one
// request, or in parallel parts when larger than s3PartSize, with no buffer of their own; a
// stream (a client's upload) goes up in s3PartSize parts, one held in memory at a time. A
// failed upload is aborted, so no object appears; the parts of one that could not even be
// aborted (the process was killed) are removed by the orphan sweep (Unfinished, AbortWrite);
// an object written in one request leaves no parts, whenever the process stops.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	name, err := s.name(key)
	if err != nil {
		return 0, err
	}
	size := int64(-1)
	switch r := r.(type) {
	case *os.File:
		if info, err := r.Stat(); err == nil && info.Mode().IsRegular() {
			if offset, err := r.Seek(0, io.SeekCurrent); err == nil {
				size = info.Size() - offset
			}
		}
	case interface{ Len() int }:
		size = int64(r.Len())
	}
	if size < 0 {
		r = contextReader{ctx: ctx, r: r}
	}
	info, err := s.client.PutObject(ctx, s.bucket, name, r, size, minio.PutObjectOptions{
		PartSize:    s3PartSize,
		ContentType: ContentType(key),
	})
	if err != nil {
		return info.Size, fmt.Errorf("put %s: %s", key, describeS3(err))
	}
	return info.Size, nil
}

// Open starts reading key: a missing key is known at once, not at the first Read.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := s.name(key)
	if err != nil {
		return nil, err
	}
	body, _, _, err := s.core().GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		if resp := minio.ToErrorResponse(err); resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("open %s: %w", key, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("open %s: %s", key, describeS3(err))
	}
	return body, nil
}

// DeletePrefix lists the objects under prefix and deletes them in batches (DeleteObjects
// takes up to 1000 keys a request).
func (s *S3) DeletePrefix(ctx context.Context, prefix string) error {
	p, err := folder(prefix)
	if err != nil {
		return err
	}
	objects := func(yield func(minio.ObjectInfo) bool) {
		for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + p, Recursive: true}) {
			if obj.Err != nil {
				err = obj.Err
				return
			}
			if !yield(obj) {
				return
			}
		}
	}
	results, rerr := s.client.RemoveObjectsWithIter(ctx, s.bucket, objects, minio.RemoveObjectsOptions{})
	if rerr != nil {
		return fmt.Errorf("delete %s: %s", prefix, describeS3(rerr))
	}
	var failed []error
	for res := range results {
		if res.Err != nil {
			failed = append(failed, fmt.Errorf("%s: %s", res.ObjectName, describeS3(res.Err)))
		}
	}
	if err != nil {
		failed = append(failed, fmt.Errorf("list: %s", describeS3(err)))
	}
	if err := errors.Join(failed...); err != nil {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	return nil
}

// Children lists one level below prefix: the common prefixes and the objects there.
func (s *S3) Children(ctx context.Context, prefix string) ([]string, error) {
	p, err := folder(prefix)
	if err != nil {
		return nil, err
	}
	var names []string
	for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + p}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %s: %s", prefix, describeS3(obj.Err))
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(obj.Key, s.prefix+p), "/"))
	}
	return names, nil
}

// List lists the bucket under prefix from after on (S3's StartAfter), a page of up to 1000
// keys per request.
func (s *S3) List(ctx context.Context, prefix, after string) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		p, err := checkListPrefix(prefix)
		if err != nil {
			yield(Object{}, err)
			return
		}
		opts := minio.ListObjectsOptions{Prefix: s.prefix + p, Recursive: true}
		if after != "" {
			opts.StartAfter = s.prefix + after
		}
		// The listing's goroutine stops when this context ends: on an early return too.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for obj := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
			if obj.Err != nil {
				yield(Object{}, fmt.Errorf("list %s: %s", prefix, describeS3(obj.Err)))
				return
			}
			if !yield(Object{Key: strings.TrimPrefix(obj.Key, s.prefix), Size: obj.Size, ModTime: obj.LastModified}, nil) {
				return
			}
		}
	}
}

// PresignGet returns a URL that GETs key for ttl without credentials: SigV4 query signing, so
// the signature covers this one object, and the store refuses it after ttl (at most 7 days).
func (s *S3) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	name, err := s.name(key)
	if err != nil {
		return "", err
	}
	u, err := s.client.PresignedGetObject(ctx, s.bucket, name, ttl, nil)
	if err != nil {
		return "", fmt.Errorf("presign %s: %w", key, err)
	}
	return u.String(), nil
}

// Origin is where the store's presigned URLs point (scheme://host), for the player pages'
// Content-Security-Policy.
func (s *S3) Origin(ctx context.Context) (string, error) {
	raw, err := s.PresignGet(ctx, "origin", time.Minute)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	return u.Scheme + "://" + u.Host, nil
}
