package audience

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

// MinViewers is the fewest viewers whose figures a media shows: below it, who finished, the
// watch time and the retention curve are withheld, because with one viewer the curve is that
// member's watched ranges, bucket for bucket, and with a few an owner who
// knows them could tell them apart. It is no defence against an owner whose own accounts are
// the others: the noise of a release is (the package doc).
const MinViewers = 5

// MinCurveViewers is the fewest viewers, at its release, whose retention curve a media shows:
// below it, the noise on each point (curveNoise counts) is larger than what it measures, and
// an owner whose accounts are all the other viewers needs that many of them for a first,
// noisy, reading of one member's curve.
const MinCurveViewers = 100

// Media is one media's audience, as of its last rollup.
type Media struct {
	MediaID    int64  `json:"media_id"`
	DurationMS *int64 `json:"duration_ms"`
	// Views are the members with a playback row (who opened it or reported a position);
	// Viewers those who played a part of it or finished it. Both are exact.
	Views   int64 `json:"views"`
	Viewers int64 `json:"viewers"`
	// Withheld is true when the figures below are null because Viewers < MinViewers (or none
	// are released yet).
	Withheld bool `json:"withheld"`
	// FiguresViewers are the viewers the figures below were released over (0 when withheld):
	// they are released with noise only when the audience has grown by a step (the package
	// doc), so Viewers may be ahead of it by up to max(MinViewers, an eighth).
	FiguresViewers int64 `json:"figures_viewers"`
	// Finished are the viewers who reached its completion point, with noise (σ 3);
	// CompletionRate is Finished / FiguresViewers.
	Finished       *int64   `json:"finished"`
	CompletionRate *float64 `json:"completion_rate"`
	// WatchTimeMS is the viewers' watched parts added up: buckets × duration / 100, the buckets
	// being the sum of the noisy retention counts (σ one duration); null also when the
	// duration is unknown.
	WatchTimeMS *int64 `json:"watch_time_ms"`
	// Retention is, for each 1 % of the video, the share of viewers who watched it, with noise
	// (σ 10 viewers over FiguresViewers); null also when FiguresViewers < MinCurveViewers.
	Retention []float64 `json:"retention"`
	// Quality is the playback quality the players reported; null before their reports carried
	// any, while fewer than MinViewers sessions did, and while the figures are Withheld.
	Quality *Quality `json:"quality"`
	// ComputedAt is when a figure here last changed; nil before the first rollup.
	ComputedAt *time.Time `json:"computed_at"`
}

// Quality is a media's playback quality as the players measured it (package quality), exact:
// it tells how the media was delivered (the network, the device). It is withheld with the
// figures above, and below MinViewers sessions; being exact, it does not resist an owner's own
// accounts as their noise does (docs/api/audience.md, its known limit).
type Quality struct {
	// Sessions are the sessions that started, or failed before their first frame.
	Sessions int64 `json:"sessions"`
	// StartupP50MS and StartupP95MS are the median and 95th percentile of the time to first
	// frame, within 10 % (rounded up to two significant digits); null when no session started.
	StartupP50MS *int32 `json:"startup_p50_ms"`
	StartupP95MS *int32 `json:"startup_p95_ms"`
	// RebufferRatio is the time spent rebuffering over the time played; null before any time
	// played was reported. Rebuffers counts the stalls.
	RebufferRatio *float64 `json:"rebuffer_ratio"`
	Rebuffers     int64    `json:"rebuffers"`
	// ErrorRate is the share of sessions that ended on a fatal error.
	ErrorRate float64 `json:"error_rate"`
	// Renditions are the renditions played (by height, 0 when the player did not say) with
	// their share of the time played, from the lowest.
	Renditions []Rendition `json:"renditions"`
}

// Rendition is one rendition's share of the time played.
type Rendition struct {
	Height int     `json:"height"`
	Share  float64 `json:"share"`
}

// Lesson is one place of a collection with its audience.
type Lesson struct {
	Chapter  *int32 `json:"chapter"`
	Position *int32 `json:"position"`
	MediaID  int64  `json:"media_id"`
	Title    string `json:"title"`
	// Started are the lesson's viewers (exact), Finished those who reached its completion
	// point, the media's noisy figure: withheld (null, Withheld true) below MinViewers
	// viewers, as a media's are.
	Started  int64  `json:"started"`
	Finished *int64 `json:"finished"`
	Withheld bool   `json:"withheld"`
	// Dropped is Started minus the next lesson's Started (absent for the last lesson): the
	// viewers lost between them (negative when more started the next one).
	Dropped *int64 `json:"dropped,omitempty"`
}

// Collection is a collection's lessons in order with their audience.
type Collection struct {
	Collection string   `json:"collection"`
	Lessons    []Lesson `json:"lessons"`
	// ComputedAt is the oldest of its lessons' rollups; nil while one has none.
	ComputedAt *time.Time `json:"computed_at"`
}

// Store reads the rolled-up audience.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// notFound is the answer to whoever may not read an audience: as if the media did not exist.
func notFound(what string) error { return apperr.Errorf(apperr.NotFound, "no such %s", what) }

// Media returns media id's audience for who: its owner or an admin; anyone else gets
// apperr.NotFound, as for a media that does not exist (or is DELETED).
func (s *Store) Media(ctx context.Context, id int64, who auth.Identity) (Media, error) {
	a := Media{MediaID: id}
	var owner int64
	var views, viewers, released, finished, buckets *int64
	var retention []int64
	var q Quality
	var sessions, rebuffers *int64
	var errorRate *float64
	var renditions map[string]float64
	err := s.pool.QueryRow(ctx, `
		SELECT m.owner_id, m.duration_ms, a.views, a.viewers, a.released_viewers, a.finished, a.watched_buckets, a.retention, a.computed_at,
		       a.quality_sessions, a.startup_p50_ms, a.startup_p95_ms, a.rebuffer_ratio, a.rebuffers, a.error_rate, a.renditions
		FROM media m LEFT JOIN media_audience a ON a.media_id = m.id WHERE m.id = $1 AND m.status <> 'DELETED'`, id).
		Scan(&owner, &a.DurationMS, &views, &viewers, &released, &finished, &buckets, &retention, &a.ComputedAt,
			&sessions, &q.StartupP50MS, &q.StartupP95MS, &q.RebufferRatio, &rebuffers, &errorRate, &renditions)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && owner != who.MemberID && !who.Admin {
		return Media{}, notFound("media")
	}
	if err != nil {
		return Media{}, fmt.Errorf("read audience of media %d: %w", id, err)
	}
	if views == nil {
		// Not rolled up yet: nobody's figures to withhold, nothing to show.
		return a, nil
	}
	a.Views, a.Viewers = *views, *viewers
	// Figures never released are not shown, whatever the viewers: rollupSQL releases them as
	// the viewers reach MinViewers, so this is a second fence. The quality is withheld with
	// them: its sessions are what players say, and one member's player may say five.
	if a.Viewers < MinViewers || *released < MinViewers {
		a.Withheld = true
		return a, nil
	}
	if sessions != nil && *sessions >= MinViewers {
		q.Sessions, q.Rebuffers, q.ErrorRate, q.Renditions = *sessions, *rebuffers, *errorRate, renditionShares(renditions)
		a.Quality = &q
	}
	a.FiguresViewers = *released
	rate := float64(*finished) / float64(a.FiguresViewers)
	a.Finished, a.CompletionRate = finished, &rate
	if a.FiguresViewers >= MinCurveViewers {
		a.Retention = make([]float64, Buckets)
		for i, n := range retention {
			a.Retention[i] = float64(n) / float64(a.FiguresViewers)
		}
	}
	if a.DurationMS != nil {
		watched := *buckets * *a.DurationMS / Buckets
		a.WatchTimeMS = &watched
	}
	return a, nil
}

// Collection returns name's lessons with their audience for who: an admin, or the owner of
// every lesson's media; anyone else, and a collection without lessons, get apperr.NotFound.
func (s *Store) Collection(ctx context.Context, name string, who auth.Identity) (Collection, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT ci.chapter, ci.position, m.id, m.title, m.owner_id, coalesce(a.viewers, 0), coalesce(a.released_viewers, 0), coalesce(a.finished, 0), a.computed_at
		FROM collection_items ci
		JOIN media m ON m.id = ci.media_id
		LEFT JOIN media_audience a ON a.media_id = m.id
		WHERE ci.collection = $1
		ORDER BY ci.chapter NULLS LAST, ci.position NULLS LAST, m.id`, name)
	if err != nil {
		return Collection{}, fmt.Errorf("read audience of collection: %w", err)
	}
	type lessonRow struct {
		Lesson
		owner      int64
		released   int64
		finished   int64
		computedAt *time.Time
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lessonRow, error) {
		var l lessonRow
		err := row.Scan(&l.Chapter, &l.Position, &l.MediaID, &l.Title, &l.owner, &l.Started, &l.released, &l.finished, &l.computedAt)
		if l.Withheld = l.Started < MinViewers || l.released < MinViewers; !l.Withheld {
			l.Finished = &l.finished
		}
		return l, err
	})
	if err != nil {
		return Collection{}, fmt.Errorf("read audience of collection: %w", err)
	}
	if len(list) == 0 {
		return Collection{}, notFound("collection")
	}
	c := Collection{Collection: name, Lessons: make([]Lesson, len(list)), ComputedAt: list[0].computedAt}
	for i, l := range list {
		if l.owner != who.MemberID && !who.Admin {
			return Collection{}, notFound("collection")
		}
		c.Lessons[i] = l.Lesson
		if i+1 < len(list) {
			dropped := l.Started - list[i+1].Started
			c.Lessons[i].Dropped = &dropped
		}
		switch {
		case l.computedAt == nil:
			c.ComputedAt = nil
		case c.ComputedAt != nil && l.computedAt.Before(*c.ComputedAt):
			c.ComputedAt = l.computedAt
		}
	}
	return c, nil
}

// renditionShares lists the rollup's map of height → share from the lowest height.
func renditionShares(m map[string]float64) []Rendition {
	list := make([]Rendition, 0, len(m))
	for h, share := range m {
		height, err := strconv.Atoi(h)
		if err != nil {
			continue // the rollup writes only integers
		}
		list = append(list, Rendition{Height: height, Share: share})
	}
	slices.SortFunc(list, func(a, b Rendition) int { return cmp.Compare(a.Height, b.Height) })
	return list
}
