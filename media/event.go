package media

import "time"

// The media event types: what a member's media outbox rows are called to the outside, by
// webhooks and by the live event stream alike (completion.go has the completions').
const (
	EventPlayable = "media.playable"
	EventReady    = "media.ready"
	EventFailed   = "media.failed"
	EventDeleted  = "media.deleted"
)

// EventTypes are every event type, in the order the API lists them.
var EventTypes = []string{EventPlayable, EventReady, EventFailed, EventDeleted, EventPlaybackCompleted, EventCollectionCompleted}

// eventOf maps an outbox kind to its event type.
var eventOf = map[string]string{
	OutboxPlayable: EventPlayable,
	OutboxReady:    EventReady,
	OutboxFailed:   EventFailed,
	OutboxDeleted:  EventDeleted,

	OutboxPlaybackCompleted:   EventPlaybackCompleted,
	OutboxCollectionCompleted: EventCollectionCompleted,
}

// EventType returns the event type of an outbox kind ("" for a kind that has none).
func EventType(kind string) string { return eventOf[kind] }

// OutboxKinds returns the outbox kinds that have an event type, and those types, in the same
// order.
func OutboxKinds() (kinds, types []string) {
	for k, t := range eventOf {
		kinds, types = append(kinds, k), append(types, t)
	}
	return kinds, types
}

// Event is one outbox row as webhooks deliver it and the event stream sends it: Standard
// Webhooks' recommended shape. It is built from the row alone, so it is the same bytes every
// time it is sent.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what an event says about its media item.
type EventData struct {
	EventID int64  `json:"event_id"`
	MediaID int64  `json:"media_id"`
	OwnerID int64  `json:"owner_id"`
	Status  string `json:"status"`
	// Reason is the failure reason the owner sees (media.failed only).
	Reason string `json:"reason,omitempty"`
}

// OutboxRow is a notification_outbox row, as read to build its Event.
type OutboxRow struct {
	ID        int64
	Kind      string
	MediaID   int64
	MemberID  int64
	CreatedAt time.Time
	Payload   map[string]any
}

// Event returns the event a media row announces (Body for a row of any kind).
func (r OutboxRow) Event() Event {
	e := Event{
		Type:      eventOf[r.Kind],
		Timestamp: r.CreatedAt.UTC(),
		Data:      EventData{EventID: r.ID, MediaID: r.MediaID, OwnerID: r.MemberID},
	}
	switch r.Kind {
	case OutboxPlayable:
		// Still encoding its other renditions; playable from now on.
		e.Data.Status = string(StatusProcessing)
	case OutboxReady:
		e.Data.Status = string(StatusReady)
	case OutboxFailed:
		e.Data.Status = string(StatusFailed)
		e.Data.Reason, _ = r.Payload["reason"].(string)
	case OutboxDeleted:
		e.Data.Status = string(StatusDeleted)
	}
	return e
}
