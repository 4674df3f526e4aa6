// Package collection is a member's progress through collections: the ordered sets of media an
// import places by (collection, chapter, order), such as the lectures of a course (seed 001).
// It reads what the collection_items view holds and what the member's playback rows say, each
// read in one statement: per item, not started, in progress or watched; per collection, the
// totals and the point to resume at.
package collection

import (
	"time"
	"unicode/utf8"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
)

// MaxNameRunes bounds a collection name (an import refuses a longer one).
const MaxNameRunes = 200

// CheckName refuses a name no import can have made: empty, too long, or not one line of UTF-8
// text. It is an apperr.Invalid error naming field.
func CheckName(field, name string) error {
	if name == "" || utf8.RuneCountInString(name) > MaxNameRunes || !httpserver.ValidText(name) {
		return apperr.Errorf(apperr.Invalid, "%s must be a collection name: 1 to %d characters of UTF-8 text without control characters",
			field, MaxNameRunes)
	}
	return nil
}

// State is where a member is with one item.
type State string

// The item states.
const (
	NotStarted State = "not_started" // no position, or still at 0
	InProgress State = "in_progress" // a position before the completion point
	Watched    State = "watched"     // reached the completion point once (a rewatch keeps it)
)

// Item is one media of a collection with the calling member's progress.
type Item struct {
	Chapter      int        `json:"chapter"`
	Order        int        `json:"order"`
	MediaID      int64      `json:"media_id"`
	Title        string     `json:"title"`
	DurationMS   int64      `json:"duration_ms,omitempty"`
	HLSKey       string     `json:"-"`
	ThumbnailKey string     `json:"-"`
	HLSURL       string     `json:"hls_url"`
	ThumbnailURL string     `json:"thumbnail_url,omitempty"`
	State        State      `json:"state"`
	PositionMS   int32      `json:"position_ms"`
	WatchedAt    *time.Time `json:"watched_at,omitempty"`
}

// Totals sum a collection for one member.
type Totals struct {
	Total      int   `json:"total"`
	Watched    int   `json:"watched"`
	DurationMS int64 `json:"duration_ms"`
	// LeftMS is what remains of the items not watched yet, from their positions.
	LeftMS int64 `json:"left_ms"`
}

// Resume is where to go on in a collection: its first item, in order, not watched yet.
type Resume struct {
	MediaID    int64  `json:"media_id"`
	Title      string `json:"title"`
	Chapter    int    `json:"chapter"`
	Order      int    `json:"order"`
	PositionMS int32  `json:"position_ms"`
}

// Progress is a collection with the member's state of every item.
type Progress struct {
	Collection string `json:"collection"`
	Totals
	// Resume is nil when every item is watched (or the collection is empty).
	Resume *Resume `json:"resume"`
	Items  []Item  `json:"items"`
}

// Summary is a collection the member has started, without its items.
type Summary struct {
	Collection string `json:"collection"`
	Totals
	Resume        *Resume   `json:"resume"`
	LastWatchedAt time.Time `json:"last_watched_at"`
}

// progressOf fills the totals and the resume point from items in order.
func progressOf(name string, items []Item) Progress {
	p := Progress{Collection: name, Items: items}
	for _, it := range items {
		p.Total++
		p.DurationMS += it.DurationMS
		if it.State == Watched {
			p.Watched++
			continue
		}
		p.LeftMS += max(it.DurationMS-int64(it.PositionMS), 0)
		if p.Resume == nil {
			p.Resume = &Resume{MediaID: it.MediaID, Title: it.Title, Chapter: it.Chapter, Order: it.Order, PositionMS: it.PositionMS}
		}
	}
	return p
}
