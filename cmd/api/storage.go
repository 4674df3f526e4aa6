package main

import (
	"context"
	"fmt"
	"time"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// The storage backends (PLAYHEAD_STORAGE).
const (
	storageLocal = "local"
	storageS3    = "s3"
)

// s3 reads the PLAYHEAD_S3_* variables. The endpoint, region and credentials fall back to the
// standard AWS_* variables (their settings' fallbacks), so that a node on AWS (or with an
// AWS-style environment) needs only the bucket.
func (e *env) s3() storage.S3Config {
	return storage.S3Config{
		Endpoint:        e.str("PLAYHEAD_S3_ENDPOINT"),
		Region:          e.str("PLAYHEAD_S3_REGION"),
		Bucket:          e.str("PLAYHEAD_S3_BUCKET"),
		AccessKeyID:     e.str("PLAYHEAD_S3_ACCESS_KEY_ID"),
		SecretAccessKey: e.str("PLAYHEAD_S3_SECRET_ACCESS_KEY"),
		PathStyle:       e.bool("PLAYHEAD_S3_PATH_STYLE"),
		Prefix:          e.str("PLAYHEAD_S3_PREFIX"),
	}
}

// validateStorage checks the storage variables. No message quotes a credential.
func (c Config) validateStorage(e *env) {
	e.check(c.Storage == storageLocal || c.Storage == storageS3, "PLAYHEAD_STORAGE: %q is not local or s3", c.Storage)
	if c.Storage == storageS3 {
		s := c.S3
		e.check(s.Bucket != "", "PLAYHEAD_S3_BUCKET: required with PLAYHEAD_STORAGE=s3")
		e.check(s.AccessKeyID != "" && s.SecretAccessKey != "",
			"PLAYHEAD_S3_ACCESS_KEY_ID/PLAYHEAD_S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY): required with PLAYHEAD_STORAGE=s3")
		if s.Endpoint != "" {
			e.check(storage.CheckEndpoint(s.Endpoint) == nil, "PLAYHEAD_S3_ENDPOINT: %q is not http(s)://host[:port]", s.Endpoint)
		}
		if s.Prefix != "" {
			e.check(storage.CheckKey(s.Prefix) == nil, "PLAYHEAD_S3_PREFIX: %q is not a relative folder such as playhead/", s.Prefix)
		}
	}
	e.check(c.SignedURLTTL >= time.Second && c.SignedURLTTL <= 24*time.Hour, "PLAYHEAD_SIGNED_URL_TTL: must be from 1s to 24h")
	e.check(c.URLSigningSecret == "" || len(c.URLSigningSecret) >= media.MinSigningSecretBytes,
		"PLAYHEAD_URL_SIGNING_SECRET: must be at least %d bytes (or unset: derived from PLAYHEAD_JWT_SECRET)", media.MinSigningSecretBytes)
	e.check(c.OrphanGrace > c.UploadTimeout && c.OrphanGrace > c.JobLease,
		"PLAYHEAD_ORPHAN_GRACE: must be longer than PLAYHEAD_UPLOAD_TIMEOUT and PLAYHEAD_JOB_LEASE (an object younger than both may still be recorded)")
	e.check(c.OrphanSweepInterval > 0, "PLAYHEAD_ORPHAN_SWEEP_INTERVAL: must be positive")
	e.check(c.OrphanSweepBatch >= 1, "PLAYHEAD_ORPHAN_SWEEP_BATCH: must be at least 1")
}

// signingSecret is the key of Playhead's object URL signatures: PLAYHEAD_URL_SIGNING_SECRET,
// or one derived from the JWT secret (media.SigningSecretFrom).
func (c Config) signingSecret() []byte {
	if c.URLSigningSecret != "" {
		return []byte(c.URLSigningSecret)
	}
	return media.SigningSecretFrom([]byte(c.JWTSecret))
}

// openStore opens the configured store. For S3 it also returns the origin its presigned URLs
// point at, which the player pages must be allowed to fetch from.
func openStore(ctx context.Context, cfg Config) (storage.Store, string, error) {
	if cfg.Storage != storageS3 {
		st, err := storage.NewLocal(cfg.StorageDir)
		if err != nil {
			return nil, "", fmt.Errorf("PLAYHEAD_STORAGE_DIR: %w", err)
		}
		return st, "", nil
	}
	st, err := storage.NewS3(ctx, cfg.S3)
	if err != nil {
		return nil, "", fmt.Errorf("PLAYHEAD_STORAGE=s3: %w", err)
	}
	origin, err := st.Origin(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("PLAYHEAD_STORAGE=s3: %w", err)
	}
	return st, origin, nil
}

// objectLinks builds the signer of the encoded files' URLs: presigned on the store when it
// can, Playhead's own otherwise.
func objectLinks(cfg Config, store storage.Store) (*media.Links, error) {
	signer, err := media.NewSigner(cfg.signingSecret())
	if err != nil {
		return nil, err
	}
	links := &media.Links{Signer: signer, TTL: cfg.SignedURLTTL}
	if p, ok := store.(storage.Presigner); ok {
		links.Direct = p
	}
	return links, nil
}
