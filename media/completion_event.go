package media

import (
	"encoding/json"
	"time"
)

// The outbox kinds of a member's completions. The flush and the marks by hand record a finish
// in playback_completions (package completion moves it into the outbox under the member's row
// lock); a collection's completion is found when a finish is moved.
const (
	OutboxPlaybackCompleted   = "playback_completed"
	OutboxCollectionCompleted = "collection_completed"
)

// The event types of completions, by webhooks and by the live event stream alike.
const (
	EventPlaybackCompleted   = "playback.completed"
	EventCollectionCompleted = "collection.completed"
)

// How a media was finished (PlaybackCompleted.How).
const (
	// FinishedByPosition is a report at or past the completion point.
	FinishedByPosition = "position"
	// FinishedByCredits is a report in the credits, before the completion point.
	FinishedByCredits = "credits"
	// FinishedByMark is a mark watched by hand.
	FinishedByMark = "marked"
)

// PlaybackCompleted is what a playback.completed event says: a member finished a media, once
// per finish (the stored row going from not finished to finished).
type PlaybackCompleted struct {
	EventID  int64 `json:"event_id"`
	MemberID int64 `json:"member_id"`
	MediaID  int64 `json:"media_id"`
	// Collections are the courses the media was an item of when the finish was announced,
	// sorted (empty, not null, for none).
	Collections []string `json:"collections"`
	// FinishedAt is the finish's event time: the report's receipt, or the mark's.
	FinishedAt time.Time `json:"finished_at"`
	// PositionMS is the position that finished it (the duration for a mark).
	PositionMS int64 `json:"position_ms"`
	// DurationMS is the media's duration then, 0 when unknown.
	DurationMS int64 `json:"duration_ms"`
	// How is FinishedByPosition, FinishedByCredits or FinishedByMark.
	How string `json:"how"`
}

// CollectionCompleted is what a collection.completed event says: a member finished every item
// of a collection, once per time the last unfinished one became finished.
type CollectionCompleted struct {
	EventID      int64  `json:"event_id"`
	MemberID     int64  `json:"member_id"`
	CollectionID string `json:"collection_id"`
	// Items is how many items the collection had, all finished.
	Items int `json:"items"`
	// MediaID is the item whose finish completed the collection.
	MediaID int64 `json:"media_id"`
	// CompletedAt is that finish's event time.
	CompletedAt time.Time `json:"completed_at"`
}

// CompletionEvent is a completion's outbox row as webhooks deliver it and the event stream
// sends it: the envelope of Event, with Data a PlaybackCompleted or a CollectionCompleted.
type CompletionEvent struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// PlaybackCompleted returns what a playback_completed row says. Its payload holds every field
// but the ids, which are the row's.
func (r OutboxRow) PlaybackCompleted() PlaybackCompleted {
	var d PlaybackCompleted
	decodePayload(r.Payload, &d)
	d.EventID, d.MemberID, d.MediaID = r.ID, r.MemberID, r.MediaID
	if d.Collections == nil {
		d.Collections = []string{}
	}
	return d
}

// CollectionCompleted returns what a collection_completed row says.
func (r OutboxRow) CollectionCompleted() CollectionCompleted {
	var d CollectionCompleted
	decodePayload(r.Payload, &d)
	d.EventID, d.MemberID, d.MediaID = r.ID, r.MemberID, r.MediaID
	return d
}

// decodePayload reads a payload (jsonb, as pgx decodes it) into d through JSON: its numbers
// arrive as float64 and its times as strings, which d's types parse. A payload the database
// wrote is valid JSON of d's shape, so an error leaves only zero fields.
func decodePayload(payload map[string]any, d any) {
	b, _ := json.Marshal(payload)
	_ = json.Unmarshal(b, d)
}

// Body returns the message an outbox row is sent as, built from the row alone (the same bytes
// on every attempt): an Event for a media kind, a CompletionEvent for a completion.
func (r OutboxRow) Body() any {
	switch r.Kind {
	case OutboxPlaybackCompleted:
		return CompletionEvent{Type: EventPlaybackCompleted, Timestamp: r.CreatedAt.UTC(), Data: r.PlaybackCompleted()}
	case OutboxCollectionCompleted:
		return CompletionEvent{Type: EventCollectionCompleted, Timestamp: r.CreatedAt.UTC(), Data: r.CollectionCompleted()}
	}
	return r.Event()
}
