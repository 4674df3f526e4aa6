package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
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
	if c.URLSigningKeys != "" {
		_, err := c.signingKeys()
		e.check(err == nil, "%v", err)
	}
	e.check(c.OrphanGrace > c.UploadTimeout && c.OrphanGrace > c.JobLease,
		"PLAYHEAD_ORPHAN_GRACE: must be longer than PLAYHEAD_UPLOAD_TIMEOUT and PLAYHEAD_JOB_LEASE (an object younger than both may still be recorded)")
	e.check(c.OrphanSweepInterval > 0, "PLAYHEAD_ORPHAN_SWEEP_INTERVAL: must be positive")
	e.check(c.OrphanSweepBatch >= 1, "PLAYHEAD_ORPHAN_SWEEP_BATCH: must be at least 1")
}

// legacySigningKey is the entry of PLAYHEAD_URL_SIGNING_KEYS that stands for the legacy key
// (signingSecret), whose links carry no kid.
const legacySigningKey = "legacy"

// signingKeys are the keys of Playhead's object URL signatures, the first signing:
// PLAYHEAD_URL_SIGNING_KEYS, or the legacy key alone when it is unset, so that a deployment
// that sets none keeps its links. No error quotes a secret.
func (c Config) signingKeys() ([]media.SigningKey, error) {
	var keys []media.SigningKey
	for entry := range strings.SplitSeq(cmp.Or(c.URLSigningKeys, legacySigningKey), ",") {
		entry = strings.TrimSpace(entry)
		if entry == legacySigningKey {
			if c.URLSigningSecret == "" && c.JWTSecret == "" {
				return nil, errors.New("PLAYHEAD_URL_SIGNING_KEYS: legacy is PLAYHEAD_URL_SIGNING_SECRET (or derived from PLAYHEAD_JWT_SECRET), and neither is set")
			}
			keys = append(keys, media.SigningKey{Secret: c.signingSecret()})
			continue
		}
		// An entry without a colon may be a secret pasted alone: it is not quoted.
		id, secret, ok := strings.Cut(entry, ":")
		if !ok || !media.ValidSigningKeyID(id) || id == legacySigningKey {
			return nil, fmt.Errorf("PLAYHEAD_URL_SIGNING_KEYS: each entry is legacy or id:secret, the id 1 to %d characters of A-Z, a-z, 0-9, _ and - (not legacy)", media.MaxSigningKeyIDLen)
		}
		if len(secret) < media.MinSigningSecretBytes {
			return nil, fmt.Errorf("PLAYHEAD_URL_SIGNING_KEYS: the secret of %s must be at least %d bytes", id, media.MinSigningSecretBytes)
		}
		keys = append(keys, media.SigningKey{ID: id, Secret: []byte(secret)})
	}
	// The other rules (each id once, legacy once) are the Signer's.
	if _, err := media.NewKeyedSigner(keys); err != nil {
		return nil, fmt.Errorf("PLAYHEAD_URL_SIGNING_KEYS: %w", err)
	}
	return keys, nil
}

// signingSecret is the legacy key of Playhead's object URL signatures:
// PLAYHEAD_URL_SIGNING_SECRET, or one derived from the JWT secret (media.SigningSecretFrom).
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
	keys, err := cfg.signingKeys()
	if err != nil {
		return nil, err
	}
	signer, err := media.NewKeyedSigner(keys)
	if err != nil {
		return nil, err
	}
	links := &media.Links{Signer: signer, TTL: cfg.SignedURLTTL}
	if p, ok := store.(storage.Presigner); ok {
		links.Direct = p
	}
	return links, nil
}
