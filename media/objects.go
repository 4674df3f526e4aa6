package media

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/storage"
)

// ObjectsPrefix is the URL path under which the encoded files are served: /objects/hls/{id}/…
// maps to the storage key hls/{id}/….
const ObjectsPrefix = "/objects/hls/"

// ObjectsHandler serves the encoded files of a media item (HLS playlists, segments,
// thumbnails) through signed URLs (Signer): no cookie or token, so that native HLS players,
// hls.js, ffmpeg and a CDN can fetch them. Playlists are rewritten for the member on every
// request, each URI replaced by a signed URL (Links), so a player given one playlist URL
// reaches exactly the files of that media, for a limited time.
//
// It replaces an access check on the raw path in front of a static file server that served the
// decoded, normalised path: /objects/hls/{mine}/../{yours}/… passed the check for {mine} and
// served {yours}. Here one function turns the request path into a media id and a storage key,
// the signature is checked for that key, the access check is for that id and the member the
// URL was issued to, and only that key is opened, through the storage interface.
type ObjectsHandler struct {
	Store  storage.Store
	Access Checker
	Links  *Links
	// StoreTimeout bounds the store's answer to one request: opening the object, and reading
	// a playlist whole. Default 10 s.
	StoreTimeout time.Duration
	// Subtitles lists a media item's caption tracks, which every master playlist served gets
	// as a SUBTITLES group (withSubtitles). Nil: none.
	Subtitles Subtitles
	// Masters assembles the master playlists of media encoded as a group, served at their
	// AssembledMaster key (Store.AssembledMaster). Nil: none are.
	Masters Masters
	// Chapters lists a media item's chapters: served as Apple's chapters JSON at ChaptersKey
	// and named by every master playlist served (addChapters). Nil: none are.
	Chapters ChapterLister
}

// Masters assembles a media item's master playlist from its recorded renditions; nil when
// none can play yet.
type Masters interface {
	AssembledMaster(ctx context.Context, id int64) ([]byte, error)
}

// defaultStoreTimeout is ObjectsHandler.StoreTimeout's default: far above an object store's
// first-byte latency, far below what the S3 client's own retries of a store that hangs take
// (ten attempts of up to a minute's wait for headers each).
const defaultStoreTimeout = 10 * time.Second

// storeRetryAfter is the Retry-After of a 503 for a store that did not answer.
const storeRetryAfter = "5"

// errStoreDown is the answer when the store fails or does not answer in time: a dependency is
// down, the client may try again. The cause is joined to it for the log, never shown.
func errStoreDown(c *fiber.Ctx, cause error) error {
	c.Set(fiber.HeaderRetryAfter, storeRetryAfter)
	return errors.Join(apperr.Errorf(apperr.Unavailable, "the object store did not answer: try again shortly"), cause)
}

// cancelOnClose ends the context of a streamed object once fasthttp has sent (or given up on)
// its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r cancelOnClose) Close() error {
	defer r.cancel()
	return r.ReadCloser.Close()
}

// Register adds GET /objects/hls/* to router (not HEAD: see httpserver.Get). The route needs
// no token: the URL's signature is the credential.
func (h *ObjectsHandler) Register(router fiber.Router) {
	httpserver.Get(router, ObjectsPrefix+"*", h.serve)
}

// objectTypes are the files an encode writes, by extension; nothing else is served. MPEG-TS
// segments are those of media encoded before fMP4 renditions and of PLAYHEAD_HLS_FORMAT=ts;
// an fMP4 rendition (video, or the audio rendition) is one .mp4 read by byte ranges; the
// storyboard and captions are WebVTT.
var objectTypes = map[string]string{
	".m3u8": "application/vnd.apple.mpegurl",
	".ts":   "video/mp2t",
	".mp4":  "video/mp4",
	".jpg":  "image/jpeg",
	".vtt":  "text/vtt; charset=utf-8",
	".json": "application/json",
}

// objectCacheControl lets the member's own browser keep a file for an hour and forbids shared
// caches: the files sit under a prefix unique to one encode, so they never change, but who may
// read them does.
const objectCacheControl = "private, max-age=3600"

// playlistCacheControl: a signed playlist is made for one member and holds links that expire.
const playlistCacheControl = "private, no-store"

func (h *ObjectsHandler) serve(c *fiber.Ctx) error {
	id, key, ok := ObjectKey(string(c.Request().URI().PathOriginal()))
	if !ok {
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	contentType, ok := objectTypes[path.Ext(key)]
	if !ok {
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	member, err := h.Links.Signer.Verify(key, string(c.Request().URI().QueryString()), time.Now())
	if err != nil {
		return err
	}
	access, err := h.Access.Playable(c.UserContext(), member, id)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if key == ChaptersKey(id) {
		return h.sendChapters(c, id)
	}
	if h.Masters != nil && key == AssembledMaster(id) {
		master, err := h.Masters.AssembledMaster(c.UserContext(), id)
		if err != nil {
			return err
		}
		if master == nil {
			return apperr.Errorf(apperr.NotFound, "not found")
		}
		return h.sendRewritten(c, member, id, key, master, access, contentType)
	}
	// The store's wait is bounded by a timer, not a deadline, so that a streamed object's
	// context can outlive the handler: a segment's body is sent after it returns.
	ctx, cancel := context.WithCancel(c.UserContext())
	timer := time.AfterFunc(cmp.Or(h.StoreTimeout, defaultStoreTimeout), cancel)
	defer timer.Stop() // a no-op once stopped or fired; ends the timer of a playlist or an error
	r, err := h.Store.Open(ctx, key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrBadKey) {
		cancel()
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	if err != nil {
		cancel()
		return errStoreDown(c, err)
	}
	if rewriterOf(key) != nil {
		defer cancel()
		defer r.Close()
		body, err := io.ReadAll(io.LimitReader(r, maxPlaylistBytes+1))
		if err != nil {
			return errStoreDown(c, fmt.Errorf("read playlist %s: %w", key, err))
		}
		if len(body) > maxPlaylistBytes {
			return fmt.Errorf("playlist %s is over %d bytes", key, maxPlaylistBytes)
		}
		return h.sendRewritten(c, member, id, key, body, access, contentType)
	}
	if !timer.Stop() { // it fired as the store answered: the stream's context is gone
		r.Close()
		return errStoreDown(c, fmt.Errorf("open %s: %w", key, context.Canceled))
	}
	size := -1 // unknown: sent chunked
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			size = int(fi.Size())
		}
	}
	c.Set(fiber.HeaderContentType, contentType)
	c.Set(fiber.HeaderCacheControl, objectCacheControl)
	if r, size, err = serveRange(c, r, size); err != nil {
		cancel()
		r.Close()
		return err
	}
	// fasthttp closes the reader once the body is sent (or the client is gone).
	c.Context().SetBodyStream(cancelOnClose{ReadCloser: r, cancel: cancel}, size)
	return nil
}

// sendRewritten sends body, the file at key of media id (a playlist, the storyboard), rewritten
// for member (its rewriter), with the caption tracks added to a master playlist.
func (h *ObjectsHandler) sendRewritten(c *fiber.Ctx, member, id int64, key string, body []byte, access Access, contentType string) error {
	duration := time.Duration(access.DurationMS) * time.Millisecond
	signed, err := rewriterOf(key)(c.UserContext(), h.Links, member, id, key, body, duration)
	if err != nil {
		return err
	}
	if h.Subtitles != nil && isMaster(body) {
		if signed, err = h.addSubtitles(c.UserContext(), member, id, signed, duration); err != nil {
			return err
		}
	}
	if h.Chapters != nil && isMaster(body) {
		if signed, err = h.addChapters(c.UserContext(), member, id, signed, duration); err != nil {
			return err
		}
	}
	c.Set(fiber.HeaderContentType, contentType)
	c.Set(fiber.HeaderCacheControl, playlistCacheControl)
	return c.Send(signed)
}

// sendChapters sends media id's chapters in Apple's JSON chapter format; a media without
// chapters has none to send (404), as its master names none.
func (h *ObjectsHandler) sendChapters(c *fiber.Ctx, id int64) error {
	if h.Chapters == nil {
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	chapters, err := h.Chapters.Chapters(c.UserContext(), id)
	if err != nil {
		return err
	}
	if len(chapters) == 0 {
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	body, err := AppleChapters(chapters)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, objectTypes[".json"])
	// The chapters change when the owner sets them again: never kept.
	c.Set(fiber.HeaderCacheControl, playlistCacheControl)
	return c.Send(body)
}

// serveRange answers a Range request for an object the store can seek in (the local store's
// files): fMP4 renditions are played by byte ranges (EXT-X-BYTERANGE), which players fetch
// with "Range: bytes=first-last". It returns the reader and size of what to send, and sets
// 206 and Content-Range; a range that starts past the end is 416. A Range header it cannot
// read, several ranges, or an object it cannot seek in is answered whole (200), as RFC 9110
// 14.2 lets a server do. Objects of an S3 store never come here: their links are presigned,
// and S3 serves the ranges.
func serveRange(c *fiber.Ctx, r io.ReadCloser, size int) (io.ReadCloser, int, error) {
	seeker, ok := r.(io.Seeker)
	if !ok || size < 0 {
		return r, size, nil
	}
	c.Set(fiber.HeaderAcceptRanges, "bytes")
	spec := c.Request().Header.Peek(fiber.HeaderRange)
	if len(spec) == 0 {
		return r, size, nil
	}
	first, last, err := fasthttp.ParseByteRange(spec, size)
	if err != nil || first > last {
		if startsPastEnd(string(spec), size) {
			c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes */%d", size))
			return r, size, apperr.Errorf(apperr.RangeNotSatisfiable, "the range %q starts past the object's %d bytes", spec, size)
		}
		return r, size, nil
	}
	if _, err := seeker.Seek(int64(first), io.SeekStart); err != nil {
		return r, size, fmt.Errorf("seek to %d: %w", first, err)
	}
	c.Status(fiber.StatusPartialContent)
	c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	n := last - first + 1
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(r, int64(n)), r}, n, nil
}

// startsPastEnd reports whether spec is one range "bytes=first-…" whose first byte is at or past
// size, or the empty suffix "bytes=-0": nothing of the object can answer it.
func startsPastEnd(spec string, size int) bool {
	rest, ok := strings.CutPrefix(spec, "bytes=")
	if !ok || strings.Contains(rest, ",") {
		return false
	}
	first, _, _ := strings.Cut(rest, "-")
	if first == "" {
		return rest == "-0"
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return err == nil && n >= int64(size)
}

// ObjectKey turns the raw request path of an encoded file into its media id and storage key:
// "/objects/hls/42/tok/v0/seg_001.ts" → 42, "hls/42/tok/v0/seg_001.ts". The path is decoded
// exactly once; anything that is not a plain relative path under the id's own prefix is
// refused: "." and ".." segments in any encoding, empty segments, backslashes, NUL and other
// control characters, a '%' left after decoding (double encoding), an id that is not the
// canonical form of a positive integer.
func ObjectKey(rawPath string) (id int64, key string, ok bool) {
	rest, ok := strings.CutPrefix(rawPath, ObjectsPrefix)
	if !ok {
		return 0, "", false
	}
	decoded, err := url.PathUnescape(rest)
	if err != nil || strings.ContainsAny(decoded, `\%`) {
		return 0, "", false
	}
	segments := strings.Split(decoded, "/")
	if len(segments) < 2 {
		return 0, "", false
	}
	for _, s := range segments {
		if s == "" || s == "." || s == ".." || strings.ContainsFunc(s, isControl) {
			return 0, "", false
		}
	}
	id, err = strconv.ParseInt(segments[0], 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != segments[0] {
		return 0, "", false
	}
	key = "hls/" + decoded
	// Belt and braces: the checks above already make the key clean and inside the prefix.
	if path.Clean(key) != key || !strings.HasPrefix(key, "hls/"+segments[0]+"/") {
		return 0, "", false
	}
	return id, key, true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
