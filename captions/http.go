package captions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/text/language"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/hls"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// Handler serves a media item's captions: POST, GET /v1/media/{id}/captions and DELETE
// /v1/media/{id}/captions/{captionID}. Adding and removing are for the media's owner and
// admins, listing for whoever may see the media; anyone else gets 404, as if the media did
// not exist.
type Handler struct {
	Store *Store
	// Media reads the media row a track is cut for (its duration, master playlist, start).
	Media *media.Store
	// Access answers who may see a media id from memory (the media cache).
	Access media.AccessLookup
	// Objects is where the tracks' files are written, beside the media's encoded files.
	Objects storage.Store
	// Metrics counts the uploads. Optional.
	Metrics *Metrics
	// Logger gets the files a deletion could not remove (the orphan sweep removes them later).
	// Default slog.Default().
	Logger *slog.Logger
	// Limits bounds the caption uploads in progress, per member and on the node: the places
	// the node's video uploads take (429 with Retry-After beyond). A caption's body is read
	// into memory, up to MaxBodyBytes, so without a bound a member's concurrent uploads would
	// each hold that much. Default: media.UploadLimits' defaults, of this handler's own.
	Limits *media.UploadLimits
}

// MaxBodyBytes bounds the body of POST /v1/media/{id}/captions: the file and the form around it.
const MaxBodyBytes = MaxFileBytes + 64<<10

// maxFieldBytes bounds the language and label fields as sent.
const maxFieldBytes = 1024

// MaxLabelRunes bounds a label (the NAME a player's menu shows).
const MaxLabelRunes = 100

// maxLanguageBytes is the longest language tag taken: BCP 47 asks implementations to support
// at least 35 characters (RFC 5646 4.4.1), which every registered tag fits.
const maxLanguageBytes = 35

// RegisterUpload adds POST /v1/media/{id}/captions to router, the app, behind middleware
// (authentication). Its body may be up to MaxBodyBytes, read into memory by LimitBody, so it
// is registered before the /v1 group whose LimitBody caps bodies lower; admit runs before
// LimitBody, so a body is read only for the media's owner or an admin, within the limits.
func (h *Handler) RegisterUpload(router fiber.Router, middleware ...fiber.Handler) {
	if h.Limits == nil {
		h.Limits = &media.UploadLimits{}
	}
	router.Post("/v1/media/:id/captions", append(middleware, h.admit, httpserver.LimitBody(MaxBodyBytes), h.create)...)
}

// admit lets a caption upload's body be read only by the media's owner or an admin (404 for
// anyone else, from the media cache: no body read and no query for a stranger), and only
// while the member and the node have an upload place (429). The place is held until the
// upload's answer.
func (h *Handler) admit(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.allowed(c, id, false); err != nil {
		return err
	}
	release, err := h.Limits.Acquire(c, auth.From(c).MemberID, "")
	if err != nil {
		return err
	}
	defer release()
	return c.Next()
}

// Register adds the list and delete routes to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	httpserver.Get(router, "/media/:id/captions", h.list)
	router.Delete("/media/:id/captions/:captionID", h.delete)
}

// create adds a caption track: the file parsed and normalised (Parse), cut on the video's
// segment grid (Cut), its files written under a new folder, then its row inserted; if the row
// cannot be, the files are removed again. Nothing of a refused file is stored.
func (h *Handler) create(c *fiber.Ctx) (err error) {
	defer func() { h.Metrics.upload(err) }()
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	who := auth.From(c)
	ctx := c.UserContext()
	m, err := h.Media.Get(ctx, id)
	if err != nil {
		return err
	}
	if m.OwnerID != who.MemberID && !who.Admin {
		return apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	if m.Status != media.StatusReady || m.HLSKey == "" {
		return notReady(id, m.Status)
	}
	_, params, err := httpserver.ContentType(c, fiber.MIMEMultipartForm)
	if err != nil {
		return err
	}
	if params["boundary"] == "" {
		return apperr.Errorf(apperr.Invalid, "expected a multipart/form-data body with file, language and label fields")
	}
	form, err := readForm(c.Body(), params["boundary"])
	if err != nil {
		return err
	}
	cues, err := Parse(form.file, time.Duration(m.DurationMS)*time.Millisecond)
	if err != nil {
		return err
	}
	grid, err := h.videoGrid(ctx, id, m.HLSKey)
	if err != nil {
		return err
	}
	track, err := Cut(cues, grid, StartMPEGTS(m.HLSStartUS))
	if err != nil {
		return err
	}
	caption := Caption{MediaID: id, Language: form.language, Label: form.label, Cues: len(cues), folder: Folder(id)}
	if err := h.write(ctx, caption.folder, track); err != nil {
		h.discard(ctx, caption.folder)
		return errors.Join(apperr.Errorf(apperr.Unavailable, "the object store did not take the captions: try again shortly"), err)
	}
	out, err := h.Store.insert(ctx, caption, who.MemberID)
	if err != nil {
		// A COMMIT whose answer was lost may have happened: the files stay if a row holds them
		// (and if that cannot be known: the orphan sweep removes them if no row does).
		if recorded, rerr := h.Store.recorded(context.WithoutCancel(ctx), caption.folder); rerr == nil && !recorded {
			h.discard(ctx, caption.folder)
		}
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

// writeConcurrency is how many of a track's files are written at once: a four-hour video has
// 2 400 segments, one PUT each on S3.
const writeConcurrency = 8

// write stores track's files under folder.
func (h *Handler) write(ctx context.Context, folder string, track Track) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(writeConcurrency)
	put := func(name string, body []byte) {
		g.Go(func() error {
			_, err := h.Objects.Put(ctx, folder+name, bytes.NewReader(body))
			return err
		})
	}
	for i, seg := range track.Segments {
		put(SegmentName(i), seg)
	}
	put(PlaylistName, track.Playlist)
	put(FileName, track.File)
	return g.Wait()
}

// discard removes folder's files, with a context of its own: the request's may be over.
func (h *Handler) discard(ctx context.Context, folder string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := h.Objects.DeletePrefix(ctx, folder); err != nil {
		h.logger().Warn("caption files left for the orphan sweep", "folder", folder, "err", err)
	}
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

type form struct {
	file            []byte
	language, label string
	hasFile         bool
}

// readForm reads the multipart body's fields file, language and label, each exactly once, and
// checks the two text fields (checkLanguage, checkLabel).
func readForm(body []byte, boundary string) (form, error) {
	// A body cut off inside a part's headers ends the form for mime/multipart as if it were
	// complete (NextPart returns io.EOF itself), so the closing delimiter is looked for first.
	if !bytes.HasSuffix(bytes.TrimRight(body, "\r\n\t "), []byte("--"+boundary+"--")) {
		return form{}, apperr.Errorf(apperr.Invalid, "malformed multipart body: it does not end with its closing boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var f form
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		// io.EOF itself only: a body that ends before its closing boundary is an error that
		// wraps io.EOF ("multipart: NextPart: EOF"), not the end of the form.
		if err == io.EOF {
			break
		}
		if err != nil {
			return form{}, apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
		}
		name := part.FormName()
		switch name {
		case "file", "language", "label":
		default:
			return form{}, apperr.Errorf(apperr.Invalid, "unknown form field %.100q (expected file, language, label)", name)
		}
		if seen[name] {
			return form{}, apperr.Errorf(apperr.Invalid, "the form field %s is given twice", name)
		}
		seen[name] = true
		limit := maxFieldBytes
		if name == "file" {
			limit = MaxFileBytes
		}
		raw, err := io.ReadAll(io.LimitReader(part, int64(limit)+1))
		if err != nil {
			return form{}, apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
		}
		switch {
		case len(raw) > limit && name == "file":
			return form{}, apperr.Errorf(apperr.TooLarge, "the caption file is over the limit of %d bytes", MaxFileBytes)
		case len(raw) > limit:
			return form{}, apperr.Errorf(apperr.Unprocessable, "%s is too long", name)
		case name == "file":
			f.file, f.hasFile = raw, true
		case name == "language":
			f.language = string(raw)
		default:
			f.label = string(raw)
		}
	}
	if !f.hasFile {
		return form{}, apperr.Errorf(apperr.Unprocessable, "file is required: a WebVTT or SRT file")
	}
	var err error
	if f.language, err = checkLanguage(f.language); err != nil {
		return form{}, err
	}
	if f.label, err = checkLabel(f.label); err != nil {
		return form{}, err
	}
	return f, nil
}

// checkLanguage returns the canonical form of a BCP 47 language tag ("en-us" → "en-US").
func checkLanguage(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", apperr.Errorf(apperr.Unprocessable, "language is required: a BCP 47 tag such as en, pt-BR or zh-Hant")
	}
	if err := checkPlaylistText("language", raw, "a BCP 47 tag such as en, pt-BR or zh-Hant"); err != nil {
		return "", err
	}
	if len(raw) > maxLanguageBytes {
		return "", apperr.Errorf(apperr.Unprocessable, "language must be a BCP 47 tag such as en, pt-BR or zh-Hant")
	}
	tag, err := language.Parse(raw)
	if err != nil {
		return "", apperr.Errorf(apperr.Unprocessable, "language %q is not a BCP 47 tag (%v): use one such as en, pt-BR or zh-Hant", raw, err)
	}
	// Canonical forms can be longer than what was sent ("sh-…" becomes "sr-Latn-…"), and the
	// canonical form is what is stored and written in the playlist.
	canonical := tag.String()
	if len(canonical) > maxLanguageBytes {
		return "", apperr.Errorf(apperr.Unprocessable, "language %q is %d characters as a canonical BCP 47 tag (%s), over %d: use a shorter one such as en, pt-BR or zh-Hant",
			raw, len(canonical), canonical, maxLanguageBytes)
	}
	return canonical, nil
}

// checkLabel returns the label trimmed: 1 to MaxLabelRunes characters of one line of text that
// the master playlist's quoted NAME can hold (checkPlaylistText).
func checkLabel(raw string) (string, error) {
	label := strings.TrimSpace(raw)
	if label == "" {
		return "", apperr.Errorf(apperr.Unprocessable, `label is required: the name a player shows in its captions menu, such as "English"`)
	}
	if err := checkPlaylistText("label", label, "one line of UTF-8 text without control characters, line or paragraph separators (U+2028, U+2029) or '\"'"); err != nil {
		return "", err
	}
	if utf8.RuneCountInString(label) > MaxLabelRunes {
		return "", apperr.Errorf(apperr.Unprocessable, "label is longer than %d characters", MaxLabelRunes)
	}
	return label, nil
}

// checkPlaylistText refuses, with a 422 naming field, the character found and what the field
// must be (want), a value the master playlist's quoted attributes cannot hold
// (hls.CheckQuoted): invalid UTF-8, '"', a control character, U+2028 or U+2029, any of which
// would let the value end its attribute or its line and write tags of the uploader's making.
// The playlist writer refuses them too (a track stored before is left out of the master);
// refusing here tells the uploader why.
func checkPlaylistText(field, s, want string) error {
	var qe *hls.QuoteError
	if !errors.As(hls.CheckQuoted(s), &qe) {
		return nil
	}
	return apperr.Errorf(apperr.Unprocessable, "%s cannot contain %s (at byte %d): it must be %s", field, qe.Char, qe.Offset, want)
}

// maxPlaylistBytes bounds a playlist read to find the video's segment grid (as the object
// server bounds those it signs).
const maxPlaylistBytes = 4 << 20

// videoGrid returns the segment durations of the media's first variant stream, read from its
// master playlist at masterKey (assembled from its renditions for an encode group's): the grid
// the caption segments are cut on.
func (h *Handler) videoGrid(ctx context.Context, id int64, masterKey string) ([]time.Duration, error) {
	var master []byte
	var err error
	if masterKey == media.AssembledMaster(id) {
		master, err = h.Media.AssembledMaster(ctx, id)
	} else {
		master, err = h.read(ctx, masterKey)
	}
	if err != nil {
		return nil, err
	}
	var variant string
	afterStreamInf := false
	for line := range strings.Lines(string(master)) {
		line = strings.TrimSpace(line)
		if afterStreamInf && line != "" && !strings.HasPrefix(line, "#") {
			variant = line
			break
		}
		afterStreamInf = afterStreamInf || strings.HasPrefix(line, "#EXT-X-STREAM-INF:")
	}
	dir := path.Dir(masterKey) + "/"
	key := path.Join(dir, variant)
	if variant == "" || strings.ContainsAny(variant, `:?#\%`) || !strings.HasPrefix(key, dir) || storage.CheckKey(key) != nil {
		return nil, fmt.Errorf("captions: master playlist %s names no variant stream of its own: %q", masterKey, variant)
	}
	body, err := h.read(ctx, key)
	if err != nil {
		return nil, err
	}
	p, err := hls.ParseMedia(body)
	if err != nil {
		return nil, fmt.Errorf("captions: %s: %w", key, err)
	}
	grid := make([]time.Duration, len(p.Segments))
	for i, s := range p.Segments {
		grid[i] = s.Duration
	}
	return grid, nil
}

func (h *Handler) read(ctx context.Context, key string) ([]byte, error) {
	r, err := h.Objects.Open(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("captions: the media's playlist %s is missing: %w", key, err)
	}
	if err != nil {
		return nil, errors.Join(apperr.Errorf(apperr.Unavailable, "the object store did not answer: try again shortly"), err)
	}
	defer r.Close()
	body, err := io.ReadAll(io.LimitReader(r, maxPlaylistBytes+1))
	if err != nil {
		return nil, errors.Join(apperr.Errorf(apperr.Unavailable, "the object store did not answer: try again shortly"), err)
	}
	if len(body) > maxPlaylistBytes {
		return nil, fmt.Errorf("captions: playlist %s is over %d bytes", key, maxPlaylistBytes)
	}
	return body, nil
}

// allowed answers 404 for media id, as if it did not exist, unless the caller owns it, is an
// admin, or (with playable) may play it.
func (h *Handler) allowed(c *fiber.Ctx, id int64, playable bool) error {
	who := auth.From(c)
	access, found, err := h.Access.Access(c.UserContext(), id)
	if err != nil {
		return err
	}
	if !found || access.OwnerID != who.MemberID && !who.Admin && !(playable && access.PlayableBy(who.MemberID)) {
		return apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	return nil
}

type listResponse struct {
	Items []Caption `json:"items"`
}

// list serves GET /v1/media/{id}/captions to whoever may see the media (its owner, an admin,
// or any member once it is playable to them).
func (h *Handler) list(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.allowed(c, id, true); err != nil {
		return err
	}
	items, err := h.Store.List(c.UserContext(), id)
	if err != nil {
		return err
	}
	if items == nil {
		items = []Caption{}
	}
	return c.JSON(listResponse{Items: items})
}

// delete serves DELETE /v1/media/{id}/captions/{captionID} to the media's owner and admins. The
// row goes first, so the track leaves every master playlist at once; then its files. Files a
// failure leaves behind are named by no row: the orphan sweep removes them after its grace.
func (h *Handler) delete(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	captionID, err := httpserver.ParamID(c, "captionID")
	if err != nil {
		return err
	}
	if err := h.allowed(c, id, false); err != nil {
		return err
	}
	folder, err := h.Store.remove(c.UserContext(), id, captionID)
	if err != nil {
		return err
	}
	h.discard(c.UserContext(), folder)
	return c.SendStatus(fiber.StatusNoContent)
}

// Metrics counts caption uploads by result.
type Metrics struct {
	uploads *prometheus.CounterVec
}

// NewMetrics registers the captions' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "playhead", Subsystem: "captions", Name: "uploads_total",
		Help: "Caption files posted to POST /v1/media/{id}/captions by result: added, refused (a 4xx: the file, the form or the caller), failed (a 5xx).",
	}, []string{"result"})}
	for _, r := range []string{"added", "refused", "failed"} {
		m.uploads.WithLabelValues(r)
	}
	reg.MustRegister(m.uploads)
	return m
}

func (m *Metrics) upload(err error) {
	if m == nil {
		return
	}
	result := "added"
	if err != nil {
		result = "refused"
		if httpserver.Status(apperr.CodeOf(err)) >= 500 {
			result = "failed"
		}
	}
	m.uploads.WithLabelValues(result).Inc()
}
