// Package tus serves resumable uploads, the tus 1.0 protocol (https://tus.io/protocols/resumable-upload),
// under /v1/uploads/ with tusd (github.com/tus/tusd/v2): the core protocol and the creation,
// creation-with-upload, termination and expiration extensions. An upload's state is in
// PostgreSQL and its bytes in the node's storage (local or S3), and its lock is a PostgreSQL
// advisory lock, so an upload cut on one node is resumed on any other. Its last byte ends it
// as POST /v1/media ends an upload: the media row and its encode job in one transaction
// (media.Committer).
package tus

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tus/tusd/v2/pkg/handler"
	expslog "golang.org/x/exp/slog"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/ratelimit"
	"github.com/playhead/playhead/storage"
)

// Config configures a Handler. Zero values take the defaults named on each field.
type Config struct {
	Pool    *pgxpool.Pool
	Objects Objects
	Locker  *Locker
	// Limits are the node's upload limits, shared with POST /v1/media: every PATCH takes a
	// place for its upload (one place for all of one upload's requests).
	Limits *media.UploadLimits
	// Commit ends an upload: the kind and attempts of its encode job.
	Commit media.Committer
	// MaxBytes is the largest upload (PLAYHEAD_MAX_UPLOAD_BYTES), refused at its creation.
	MaxBytes int64
	// Expiry is how long an unfinished upload nothing is sent to lives (PLAYHEAD_UPLOAD_EXPIRY);
	// each request that stores bytes starts it again. Default 24 h.
	Expiry time.Duration
	// UnfinishedPerMember bounds a member's unfinished uploads (PLAYHEAD_UPLOADS_UNFINISHED);
	// beyond it a creation is refused 429. Default 10.
	UnfinishedPerMember int
	// PartSize is the size of the parts an upload is stored in, and of the buffer a request
	// holds: at least storage.MinPartSize. Default 8 MiB.
	PartSize int64
	// LockWait is how long a HEAD or DELETE waits for another request of its upload to let go
	// of the lock (423 beyond). Default 20 s.
	LockWait time.Duration
	// RateLimit bounds each member's requests that change uploads (POST, PATCH and DELETE;
	// PLAYHEAD_UPLOAD_RATE and PLAYHEAD_UPLOAD_BURST): beyond it they are refused 429 with
	// Retry-After. Optional: nil is no limit.
	RateLimit *ratelimit.Limiter
	Metrics   *Metrics

	// maxTailPieces bounds an upload's tail pieces (at least 2: a merge leaves one). Default
	// maxTailPieces. Set by tests (export_test.go).
	maxTailPieces int
	// beforeTailWrite, when set, is called before each commit of bytes to a tail (tests).
	beforeTailWrite func()
}

func (c Config) withDefaults() Config {
	c.Expiry = cmp.Or(c.Expiry, 24*time.Hour)
	c.UnfinishedPerMember = cmp.Or(c.UnfinishedPerMember, 10)
	c.PartSize = cmp.Or(c.PartSize, 8<<20)
	c.LockWait = cmp.Or(c.LockWait, 20*time.Second)
	c.maxTailPieces = cmp.Or(c.maxTailPieces, maxTailPieces)
	if c.Limits == nil {
		c.Limits = &media.UploadLimits{}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Pool == nil || c.Objects == nil || c.Locker == nil || c.Metrics == nil:
		return errors.New("tus: Config needs Pool, Objects, Locker and Metrics")
	case c.MaxBytes <= 0:
		return errors.New("tus: MaxBytes must be positive")
	case c.PartSize < storage.MinPartSize:
		return fmt.Errorf("tus: PartSize %d is below S3's minimum part of %d bytes", c.PartSize, storage.MinPartSize)
	case c.Expiry < 0 || c.UnfinishedPerMember < 0:
		return errors.New("tus: Expiry and UnfinishedPerMember must not be negative")
	}
	return nil
}

// Handler serves the tus routes.
type Handler struct {
	cfg   Config
	store *store
	tusd  *handler.UnroutedHandler
	// The tusd handlers, each behind tusd's middleware (protocol version, OPTIONS).
	options, create, head, patch, terminate http.Handler
}

// Base is the folder of the tus routes: POST Base creates an upload, Base/{id} is one.
const Base = "/v1/uploads"

// FirstByteRoutes are the routes whose bodies are uploads, for httpserver.Config.FirstByteRoutes:
// the creation (with its first bytes) and every PATCH.
var FirstByteRoutes = []httpserver.Route{
	{Method: fiber.MethodPost, Path: Base},
	{Method: fiber.MethodPatch, Path: Base, Under: true},
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &store{pool: cfg.Pool, objects: cfg.Objects, partSize: cfg.PartSize, expiry: cfg.Expiry,
		perMember: cfg.UnfinishedPerMember, commit: cfg.Commit, metrics: cfg.Metrics,
		maxPieces: cfg.maxTailPieces, beforeTailWrite: cfg.beforeTailWrite}
	s.buffers.New = func() any { b := make([]byte, cfg.PartSize); return &b }
	composer := handler.NewStoreComposer()
	composer.UseCore(s)
	composer.UseTerminater(s)
	composer.UseLocker(cfg.Locker)
	tusd, err := handler.NewUnroutedHandler(handler.Config{
		StoreComposer:      composer,
		BasePath:           Base + "/",
		MaxSize:            cfg.MaxBytes,
		DisableDownload:    true,
		AcquireLockTimeout: cfg.LockWait,
		// CORS is the app's (httpserver.CORS, for the origins of PLAYHEAD_CORS_ORIGINS only),
		// for these routes as for every other.
		Cors: &handler.CorsConfig{Disable: true},
		// tusd logs every request at info, and a client's dropped connection as an error. What
		// matters reaches the app's error handler instead: a 5xx answer is logged there.
		Logger: expslog.New(expslog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, store: s, tusd: tusd}
	h.options = tusd.Middleware(http.NotFoundHandler()) // the middleware answers OPTIONS itself
	h.create = tusd.Middleware(http.HandlerFunc(tusd.PostFile))
	h.head = tusd.Middleware(http.HandlerFunc(tusd.HeadFile))
	h.patch = tusd.Middleware(http.HandlerFunc(tusd.PatchFile))
	h.terminate = tusd.Middleware(http.HandlerFunc(tusd.DelFile))
	return h, nil
}

// Register adds the tus routes to router (the app, before any middleware that reads bodies
// into memory) behind authenticate: every tus request carries the member's token.
func (h *Handler) Register(router fiber.Router, authenticate fiber.Handler) {
	router.Add(fiber.MethodOptions, Base, authenticate, h.discover)
	router.Add(fiber.MethodPost, Base, authenticate, h.createUpload)
	router.Add(fiber.MethodHead, Base+"/:uploadID", authenticate, h.headUpload)
	router.Add(fiber.MethodPatch, Base+"/:uploadID", authenticate, h.patchUpload)
	router.Add(fiber.MethodDelete, Base+"/:uploadID", authenticate, h.terminateUpload)
}

// discover answers OPTIONS: the protocol versions, extensions and maximum size.
func (h *Handler) discover(c *fiber.Ctx) error {
	return h.serve(c, &request{member: auth.From(c).MemberID}, "", nil, h.options)
}

// createUpload is the creation (POST): the metadata is read strictly here, before tusd.
func (h *Handler) createUpload(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	header := &c.Request().Header
	if len(header.Peek("Upload-Defer-Length")) > 0 {
		return apperr.Errorf(apperr.Invalid, "Upload-Length is required: uploads of a length not known yet (creation-defer-length) are not taken")
	}
	if len(header.Peek("Upload-Concat")) > 0 {
		return apperr.Errorf(apperr.Invalid, "Upload-Concat: concatenation is not supported")
	}
	// tusd takes what strconv.ParseInt takes ("+5"); the protocol says digits.
	length := string(header.Peek("Upload-Length"))
	switch {
	case !validLength.MatchString(length):
		return apperr.Errorf(apperr.Invalid, "Upload-Length must be the file's size in bytes, a number of digits")
	case strings.TrimLeft(length, "0") == "":
		return apperr.Errorf(apperr.Unprocessable, "the file is empty")
	}
	withBody := header.ContentLength() != 0 && string(header.ContentType()) == "application/offset+octet-stream"
	// tusd creates the upload before it looks at the body's length: refused after, the upload
	// would stay, unnamed, in the member's unfinished uploads.
	if size, _ := strconv.ParseInt(length, 10, 64); withBody && int64(header.ContentLength()) > size {
		return apperr.Errorf(apperr.TooLarge, "the body is longer than Upload-Length")
	}
	meta, err := parseMetadata(string(header.Peek("Upload-Metadata")))
	if err != nil {
		return err
	}
	details, err := uploadDetails(meta)
	if err != nil {
		return err
	}
	if err := h.allow(c, member); err != nil {
		return err
	}
	st := &request{member: member, create: &creation{metadata: meta, details: details}}
	var upload *media.UploadBody
	if withBody {
		release, err := h.cfg.Limits.Acquire(c, member, "")
		if err != nil {
			return err
		}
		defer release()
		upload = h.cfg.Limits.Body(c, httpserver.BodyStream(c))
	}
	return h.serve(c, st, "", upload, h.create)
}

// patchUpload appends to an upload; it holds the upload's place in the node's limits.
func (h *Handler) patchUpload(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	id, err := h.owned(c, member, true)
	if err != nil {
		return err
	}
	// tusd takes what strconv.ParseInt takes ("+10"); the protocol says digits.
	if !validLength.MatchString(string(c.Request().Header.Peek("Upload-Offset"))) {
		return apperr.Errorf(apperr.Invalid, "Upload-Offset must be the number of bytes the upload holds, a number of digits")
	}
	release, err := h.cfg.Limits.Acquire(c, member, id)
	if err != nil {
		return err
	}
	defer release()
	upload := h.cfg.Limits.Body(c, httpserver.BodyStream(c))
	return h.serve(c, &request{member: member}, id, upload, h.patch)
}

// headUpload answers where an upload stands (its offset, or the media it became).
func (h *Handler) headUpload(c *fiber.Ctx) error {
	st, err := h.bodiless(c, h.head, false)
	if err == nil && st.mediaID == 0 {
		// A client asks where an unfinished upload stands only to resume it.
		h.cfg.Metrics.resumed.Inc()
	}
	return err
}

// terminateUpload removes an unfinished upload (DELETE, the termination extension).
func (h *Handler) terminateUpload(c *fiber.Ctx) error {
	_, err := h.bodiless(c, h.terminate, true)
	return err
}

// bodiless serves a request for one upload without a body; it waits for the upload's lock.
// limited says whether it counts against the member's rate limit.
func (h *Handler) bodiless(c *fiber.Ctx, serve http.Handler, limited bool) (*request, error) {
	member := auth.From(c).MemberID
	id, err := h.owned(c, member, limited)
	if err != nil {
		return nil, err
	}
	st := &request{member: member, waitForLock: true}
	return st, h.serve(c, st, id, nil, serve)
}

var (
	validID     = regexp.MustCompile(`^[0-9a-f]{32}$`)
	validLength = regexp.MustCompile(`^[0-9]{1,19}$`)
)

// owned returns the upload id of c's path when it names an upload of member: another
// member's upload is as missing as one that never existed (404), and is never locked or read
// by tusd. A limited request (one that changes the upload) takes its place in the member's
// rate limit once its id is well-formed, before the database is asked.
func (h *Handler) owned(c *fiber.Ctx, member int64, limited bool) (string, error) {
	id := utils.CopyString(c.Params("uploadID"))
	notFound := apperr.Errorf(apperr.NotFound, "no such upload")
	if !validID.MatchString(id) {
		return "", notFound
	}
	if limited {
		if err := h.allow(c, member); err != nil {
			return "", err
		}
	}
	var owner int64
	err := h.cfg.Pool.QueryRow(c.UserContext(), `SELECT owner_id FROM uploads WHERE id = $1`, id).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && owner != member {
		return "", notFound
	}
	if err != nil {
		return "", fmt.Errorf("look up upload: %w", err)
	}
	return id, nil
}

// allow takes one of member's requests from the rate limit, or refuses it: 429 with
// Retry-After. It is asked once a request is well-formed, before the database or storage
// sees it: what the limit guards is their work, and a request refused by its headers or its
// id costs less than the limit's own check.
func (h *Handler) allow(c *fiber.Ctx, member int64) error {
	if h.cfg.RateLimit == nil {
		return nil
	}
	ok, wait := h.cfg.RateLimit.Allow(member)
	if ok {
		return nil
	}
	h.cfg.Metrics.rateLimited.Inc()
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(ratelimit.RetryAfterSeconds(wait)))
	return apperr.Errorf(apperr.TooManyRequests, "too many upload requests; try again after Retry-After seconds")
}
