package media

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/hls"
)

// Chapter is one chapter of a media item: Title, from StartMS (milliseconds from the start) to
// the next chapter's start, the last one to the end.
type Chapter struct {
	StartMS int64  `json:"start_ms"`
	Title   string `json:"title"`
}

// ChapterLister lists a media item's chapters by start (markers.Store).
type ChapterLister interface {
	Chapters(ctx context.Context, mediaID int64) ([]Chapter, error)
}

// ChaptersKey is the key of media id's chapters JSON, which the object server writes from
// the chapters' rows on every request (no object is stored there): the file a master
// playlist's com.apple.hls.chapters entry names.
func ChaptersKey(id int64) string { return "hls/" + strconv.FormatInt(id, 10) + "/chapters.json" }

// appleChapter is one entry of Apple's JSON chapter format for HLS ("Providing JavaScript
// Object Notation (JSON) chapters"): its number from 1, its start in seconds and its titles
// by BCP 47 language. A chapter's language is not known, so its one title is "und".
type appleChapter struct {
	Chapter   int          `json:"chapter"`
	StartTime float64      `json:"start-time"`
	Titles    []appleTitle `json:"titles"`
}

type appleTitle struct {
	Language string `json:"language"`
	Title    string `json:"title"`
}

// AppleChapters writes chapters in Apple's JSON chapter format. encoding/json escapes U+2028
// and U+2029 and every control character, so a title is always one JSON string.
func AppleChapters(chapters []Chapter) ([]byte, error) {
	out := make([]appleChapter, len(chapters))
	for i, c := range chapters {
		out[i] = appleChapter{Chapter: i + 1, StartTime: float64(c.StartMS) / 1000,
			Titles: []appleTitle{{Language: "und", Title: c.Title}}}
	}
	return json.Marshal(out)
}

// chaptersDataID is the DATA-ID Apple's players read chapters from.
const chaptersDataID = "com.apple.hls.chapters"

// addChapters adds to a master playlist, already signed for member, an EXT-X-SESSION-DATA
// line whose URI is the signed URL of media id's chapters JSON, before the first
// EXT-X-STREAM-INF, when the media has chapters. A master that already has the entry is left
// as it is. The titles are never written in the playlist, only in the JSON: nothing a member
// types reaches a playlist line.
func (h *ObjectsHandler) addChapters(ctx context.Context, member, id int64, master []byte, duration time.Duration) ([]byte, error) {
	if bytes.Contains(master, []byte(chaptersDataID)) {
		return master, nil
	}
	chapters, err := h.Chapters.Chapters(ctx, id)
	if err != nil || len(chapters) == 0 {
		return master, err
	}
	dataID, err := hls.QuotedAttribute("DATA-ID", chaptersDataID)
	if err != nil {
		return nil, err
	}
	uri, err := hls.QuotedAttribute("URI", h.Links.Playlist(member, ChaptersKey(id), duration))
	if err != nil {
		return nil, fmt.Errorf("media: chapters of media %d: %w", id, err)
	}
	entry := "#EXT-X-SESSION-DATA:" + dataID + "," + uri + "\n"
	var out bytes.Buffer
	out.Grow(len(master) + len(entry))
	for line := range strings.Lines(string(master)) {
		if entry != "" && strings.HasPrefix(line, "#EXT-X-STREAM-INF:") {
			out.WriteString(entry)
			entry = ""
		}
		out.WriteString(line)
	}
	return out.Bytes(), nil
}
