package media

import (
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

	"github.com/playhead/playhead/apperr"
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
}

// Register adds GET (and HEAD) /objects/hls/* to router. The routes need no token: the URL's
// signature is the credential.
func (h *ObjectsHandler) Register(router fiber.Router) {
	router.Get(ObjectsPrefix+"*", h.serve)
}

// objectTypes are the files an encode writes, by extension; nothing else is served.
var objectTypes = map[string]string{
	".m3u8": "application/vnd.apple.mpegurl",
	".ts":   "video/mp2t",
	".jpg":  "image/jpeg",
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
	r, err := h.Store.Open(c.UserContext(), key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrBadKey) {
		return apperr.Errorf(apperr.NotFound, "not found")
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if path.Ext(key) == ".m3u8" {
		defer r.Close()
		body, err := io.ReadAll(io.LimitReader(r, maxPlaylistBytes+1))
		if err != nil {
			return fmt.Errorf("read playlist %s: %w", key, err)
		}
		if len(body) > maxPlaylistBytes {
			return fmt.Errorf("playlist %s is over %d bytes", key, maxPlaylistBytes)
		}
		signed, err := signPlaylist(c.UserContext(), h.Links, member, id, key, body, time.Duration(access.DurationMS)*time.Millisecond)
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, contentType)
		c.Set(fiber.HeaderCacheControl, playlistCacheControl)
		return c.Send(signed)
	}
	size := -1 // unknown: sent chunked
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			size = int(fi.Size())
		}
	}
	c.Set(fiber.HeaderContentType, contentType)
	c.Set(fiber.HeaderCacheControl, objectCacheControl)
	// fasthttp closes the reader once the body is sent (skipped for HEAD, or the client is gone).
	c.Context().SetBodyStream(r, size)
	return nil
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
