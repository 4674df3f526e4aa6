// Package media is the media catalogue: the media row, who may play it, and the admin routes
// that register and change media. Every change notifies all nodes so their caches evict it.
package media

import (
	"time"
)

// Status is where a media item is in its life.
type Status string

// The media statuses. READY media is playable, and so is PROCESSING media whose encode has
// finished a first rendition (Media.Playable).
const (
	StatusUploaded   Status = "UPLOADED"
	StatusProcessing Status = "PROCESSING"
	StatusReady      Status = "READY"
	StatusFailed     Status = "FAILED"
	// StatusDeleted is a media its owner or an administrator deleted, until its deletion job
	// has removed it: every read treats it as missing, and no write of the pipeline changes it.
	StatusDeleted Status = "DELETED"
)

// Visibility says who may play READY media.
type Visibility string

// The visibilities: PUBLIC media is playable by every member, PRIVATE only by its owner.
const (
	VisibilityPublic  Visibility = "PUBLIC"
	VisibilityPrivate Visibility = "PRIVATE"
)

// Valid reports whether s is a status a media may be given: DELETED is not, a media becomes
// DELETED only by its deletion.
func (s Status) Valid() bool {
	switch s {
	case StatusUploaded, StatusProcessing, StatusReady, StatusFailed:
		return true
	}
	return false
}

// Valid reports whether v is a known visibility.
func (v Visibility) Valid() bool { return v == VisibilityPublic || v == VisibilityPrivate }

// Media is one media item.
type Media struct {
	ID         int64      `json:"id"`
	OwnerID    int64      `json:"owner_id"`
	Title      string     `json:"title"`
	Status     Status     `json:"status"`
	Visibility Visibility `json:"visibility"`
	// DurationMS is 0 when the duration is not known yet.
	DurationMS int64     `json:"duration_ms,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// HLSKey, ThumbnailKey and StoryboardKey are storage keys of the encoded outputs, set
	// when READY (StoryboardKey stays empty for media encoded before storyboards).
	HLSKey        string `json:"-"`
	ThumbnailKey  string `json:"-"`
	StoryboardKey string `json:"-"`
	// HLSStartUS is where the video starts in its segments' timestamps (µs), -1 when unknown
	// (media encoded before it was recorded).
	HLSStartUS int64 `json:"-"`
	// FailureReason says why the media is FAILED.
	FailureReason string `json:"failure_reason,omitempty"`
	// Playable is true when the media can be played: READY, or PROCESSING with its first
	// renditions encoded (the others are added to its master playlist as they finish).
	Playable bool `json:"playable"`
	// Intro and Credits are the media's intro and credits, nil when not marked (markers).
	Intro   *Span `json:"intro,omitempty"`
	Credits *Span `json:"credits,omitempty"`
}

// Span is a stretch of a media item, [StartMS, EndMS) in milliseconds from its start.
type Span struct {
	StartMS int64 `json:"start_ms"`
	EndMS   int64 `json:"end_ms"`
}

// span returns the Span of two nullable columns, nil when they are NULL (the migration keeps
// both NULL or neither).
func span(start, end *int64) *Span {
	if start == nil || end == nil {
		return nil
	}
	return &Span{StartMS: *start, EndMS: *end}
}

// Access is the part of a media row that decides who may play it: small, so that a cache of
// many of them stays small.
type Access struct {
	OwnerID    int64
	DurationMS int64
	Status     Status
	Visibility Visibility
	// Encoding is true for PROCESSING media that can already play (its first renditions).
	Encoding bool
	// CreditsStartMS is where the credits start, 0 when not marked: a position past it
	// finishes the media (media.Completion.State).
	CreditsStartMS int64
}

// PlayableBy reports whether member may play the media: READY, or playable while it encodes,
// and public or owned.
func (a Access) PlayableBy(member int64) bool {
	return (a.Status == StatusReady || a.Status == StatusProcessing && a.Encoding) &&
		(a.Visibility == VisibilityPublic || a.OwnerID == member)
}
