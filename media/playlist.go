package media

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/hls"
	"github.com/playhead/playhead/storage"
)

// maxPlaylistBytes bounds a playlist read into memory to be signed. A four-hour video cut
// into two-second segments has a variant playlist of about 300 KB.
const maxPlaylistBytes = 4 << 20

// errPlaylistURI is a playlist entry that does not name a file of the same media: a playlist
// the encoder did not write. It is a server error, never served.
var errPlaylistURI = errors.New("media: playlist refers to something other than a file of its media")

// rewriter rewrites a file that names other files of its media (a playlist, the storyboard)
// for member before it is served: every reference becomes a signed URL.
type rewriter func(ctx context.Context, links *Links, member, id int64, key string, body []byte, duration time.Duration) ([]byte, error)

// rewriterOf returns the rewriter of the file at key, or nil for a file served as stored.
func rewriterOf(key string) rewriter {
	switch {
	case path.Ext(key) == ".m3u8":
		return signPlaylist
	case path.Base(key) == storyboardName:
		return signStoryboard
	}
	return nil
}

// storyboardName is the file name of an encode's storyboard WebVTT (encoder's storyboardName).
const storyboardName = "storyboard.vtt"

// signStoryboard returns the storyboard WebVTT at key with each cue's sprite reference
// ("sprite_000.jpg#xywh=0,0,160,90") replaced by a signed URL of the sprite, its fragment
// kept. The page may ask for a preview of any moment while the video plays, so a sprite's link
// is valid for the links' TTL plus the whole duration.
func signStoryboard(ctx context.Context, links *Links, member, id int64, key string, body []byte, duration time.Duration) ([]byte, error) {
	mediaPrefix := "hls/" + strconv.FormatInt(id, 10) + "/"
	var out bytes.Buffer
	out.Grow(len(body) * 3)
	for line := range strings.Lines(string(body)) {
		line = strings.TrimRight(line, "\r\n")
		if uri, fragment, ok := strings.Cut(line, "#xywh="); ok && !strings.Contains(line, "-->") {
			target, err := resolveURI(key, mediaPrefix, uri)
			if err != nil || path.Ext(target) != ".jpg" {
				return nil, fmt.Errorf("media: storyboard %s: %w", key, cmp.Or(err, errPlaylistURI))
			}
			signed, err := links.File(ctx, member, target, duration)
			if err != nil {
				return nil, err
			}
			line = signed + "#xywh=" + fragment
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// signPlaylist returns the HLS playlist at key, of media id, with every URI replaced by a
// signed URL for member: variant playlists by Playhead's own (they are signed in turn when
// fetched), segments and thumbnails by links.File. A segment's link is valid for the links'
// TTL plus its start time in the video (the sum of the EXTINF durations before it); an
// EXT-X-MAP initialisation section's for TTL plus the start of the segment it precedes.
func signPlaylist(ctx context.Context, links *Links, member, id int64, key string, body []byte, duration time.Duration) ([]byte, error) {
	mediaPrefix := "hls/" + strconv.FormatInt(id, 10) + "/"
	sign := func(uri string, offset time.Duration) (string, error) {
		target, err := resolveURI(key, mediaPrefix, uri)
		if err != nil {
			return "", err
		}
		if path.Ext(target) == ".m3u8" {
			return links.Playlist(member, target, duration), nil
		}
		return links.File(ctx, member, target, offset)
	}
	var out bytes.Buffer
	out.Grow(len(body) + len(body)/2)
	var offset, pending time.Duration // start of the next segment; length of the segment announced by EXTINF
	for line := range strings.Lines(string(body)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
		case strings.HasPrefix(line, "#EXTINF:"):
			secs, _, _ := strings.Cut(strings.TrimPrefix(line, "#EXTINF:"), ",")
			f, err := strconv.ParseFloat(strings.TrimSpace(secs), 64)
			if err != nil || f < 0 {
				return nil, fmt.Errorf("media: playlist %s: bad %q", key, line)
			}
			pending = time.Duration(f * float64(time.Second))
		case strings.HasPrefix(line, "#"):
			var err error
			if line, err = signAttributeURIs(line, func(uri string) (string, error) { return sign(uri, offset) }); err != nil {
				return nil, fmt.Errorf("media: playlist %s: %w", key, err)
			}
		default:
			signed, err := sign(line, offset)
			if err == nil {
				// A line break in the signed URL would start a line of the signer's making.
				err = hls.CheckURILine(signed)
			}
			if err != nil {
				return nil, fmt.Errorf("media: playlist %s: %w", key, err)
			}
			line = signed
			offset += pending
			pending = 0
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// signAttributeURIs replaces the value of every URI="…" attribute of a tag (EXT-X-MAP,
// EXT-X-MEDIA, EXT-X-I-FRAME-STREAM-INF, EXT-X-KEY) with sign's URL, which must be one
// hls.CheckQuoted takes.
func signAttributeURIs(line string, sign func(string) (string, error)) (string, error) {
	const attr = `URI="`
	var b strings.Builder
	rest := line
	for {
		i := strings.Index(rest, attr)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		// Only a whole attribute name: preceded by the tag's colon or a comma.
		if i > 0 && rest[i-1] != ':' && rest[i-1] != ',' {
			b.WriteString(rest[:i+len(attr)])
			rest = rest[i+len(attr):]
			continue
		}
		b.WriteString(rest[:i+len(attr)])
		rest = rest[i+len(attr):]
		end := strings.IndexByte(rest, '"')
		if end < 0 {
			return "", fmt.Errorf("unterminated URI attribute in %q", line)
		}
		signed, err := sign(rest[:end])
		if err == nil {
			err = hls.CheckQuoted(signed)
		}
		if err != nil {
			return "", err
		}
		b.WriteString(signed)
		rest = rest[end:]
	}
}

// resolveURI turns a playlist entry into the storage key it names, relative to the playlist
// at key: only a plain relative path that stays inside mediaPrefix (hls/{id}/) is accepted —
// no scheme, no absolute path, no query, no "..": what the encoder writes.
func resolveURI(key, mediaPrefix, uri string) (string, error) {
	if uri == "" || strings.ContainsAny(uri, `:?#\%`) || strings.HasPrefix(uri, "/") || strings.ContainsFunc(uri, isControl) {
		return "", fmt.Errorf("%w: %q", errPlaylistURI, uri)
	}
	for seg := range strings.SplitSeq(uri, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: %q", errPlaylistURI, uri)
		}
	}
	target := path.Join(path.Dir(key), uri)
	if !strings.HasPrefix(target, mediaPrefix) || storage.CheckKey(target) != nil {
		return "", fmt.Errorf("%w: %q", errPlaylistURI, uri)
	}
	return target, nil
}

// SubtitleTrack is a caption track of a media item as its master playlist lists it.
type SubtitleTrack struct {
	// Name is the track's label (NAME), Language its BCP 47 tag (LANGUAGE).
	Name, Language string
	// Playlist is the storage key of the track's media playlist, under the media's hls/{id}/.
	Playlist string
}

// Subtitles lists the caption tracks of a media item in the order its master playlist lists
// them (captions.Store).
type Subtitles interface {
	SubtitleTracks(ctx context.Context, mediaID int64) ([]SubtitleTrack, error)
}

// subtitlesGroup is the GROUP-ID of the caption tracks in a master playlist.
const subtitlesGroup = "subs"

// isMaster reports whether a playlist is a master playlist: one that lists variant streams.
func isMaster(body []byte) bool { return bytes.Contains(body, []byte("#EXT-X-STREAM-INF:")) }

// addSubtitles adds media id's caption tracks to its master playlist, already signed for
// member: one EXT-X-MEDIA line per track (TYPE=SUBTITLES, GROUP-ID "subs", DEFAULT=NO;
// AUTOSELECT=YES on the first track of each language only, since RFC 8216 4.3.4.1.1 asks the
// AUTOSELECT members of a group to differ in LANGUAGE), with the signed URL of its playlist,
// before the first EXT-X-STREAM-INF; and SUBTITLES="subs" on every EXT-X-STREAM-INF (never on
// EXT-X-I-FRAME-STREAM-INF: I-frame playlists have no renditions). It works on the stored
// master, of an MPEG-TS encode (older media, or PLAYHEAD_HLS_FORMAT=ts) or an fMP4 one, so
// captions added later reach both. A master that already names a SUBTITLES group is left as it is; a track whose
// label or language a playlist cannot hold (hls.CheckQuoted) is left out.
func (h *ObjectsHandler) addSubtitles(ctx context.Context, member, id int64, master []byte, duration time.Duration) ([]byte, error) {
	tracks, err := h.Subtitles.SubtitleTracks(ctx, id)
	if err != nil || len(tracks) == 0 || bytes.Contains(master, []byte("SUBTITLES=")) {
		return master, err
	}
	mediaPrefix := "hls/" + strconv.FormatInt(id, 10) + "/"
	group := hls.Master{Version: 1}
	languages := map[string]bool{}
	for _, t := range tracks {
		if !strings.HasPrefix(t.Playlist, mediaPrefix) || storage.CheckKey(t.Playlist) != nil || path.Ext(t.Playlist) != ".m3u8" {
			return nil, fmt.Errorf("%w: caption playlist %q", errPlaylistURI, t.Playlist)
		}
		// A label or language a playlist cannot hold (a row from before the upload refused
		// U+2028, say) leaves its track out rather than failing the master: the owner chose
		// it, and every viewer of the video would lose the video with it. The track stays
		// listed by the API, where the owner can delete it.
		unwritable := hls.CheckQuoted(t.Name)
		if t.Language != "" {
			unwritable = cmp.Or(unwritable, hls.CheckQuoted(t.Language))
		}
		if unwritable != nil {
			slog.WarnContext(ctx, "caption track left out of the master playlist", "media", id, "playlist", t.Playlist, "err", unwritable)
			continue
		}
		group.Media = append(group.Media, hls.Rendition{Type: "SUBTITLES", GroupID: subtitlesGroup, Name: t.Name, Language: t.Language,
			Autoselect: !languages[t.Language], URI: h.Links.Playlist(member, t.Playlist, duration)})
		languages[t.Language] = true
	}
	if len(group.Media) == 0 {
		return master, nil
	}
	subtitles, err := hls.QuotedAttribute("SUBTITLES", subtitlesGroup)
	if err != nil {
		return nil, err
	}
	// hls.Master writes the lines, and refuses a value that would leave its quoted string or
	// its line (hls.CheckQuoted, checked above for NAME and LANGUAGE); only its EXT-X-MEDIA
	// lines are taken.
	written, err := group.Marshal()
	if err != nil {
		return nil, fmt.Errorf("media: captions of media %d: %w", id, err)
	}
	var renditions []string
	for line := range strings.Lines(string(written)) {
		if strings.HasPrefix(line, "#EXT-X-MEDIA:") {
			renditions = append(renditions, line)
		}
	}
	var out bytes.Buffer
	out.Grow(len(master) + len(written) + 32*bytes.Count(master, []byte("\n")))
	for line := range strings.Lines(string(master)) {
		if strings.HasPrefix(line, "#EXT-X-STREAM-INF:") {
			for _, r := range renditions {
				out.WriteString(r)
			}
			renditions = nil
			line = strings.TrimRight(line, "\r\n") + "," + subtitles + "\n"
		}
		out.WriteString(line)
	}
	return out.Bytes(), nil
}
