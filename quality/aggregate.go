package quality

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/lifecycle"
)

// Config configures an Aggregator.
type Config struct {
	// Pool is where the counters are written.
	Pool *pgxpool.Pool
	// Interval is how often the sums are written (default 10 s).
	Interval time.Duration
	// MaxMedia bounds the media one node holds sums for between two writes (default 100 000):
	// a report for another media past it is dropped and counted. A media's sums are about
	// 500 bytes, at most some 10 KB (every startup bucket, MaxHeights heights).
	MaxMedia int
	// Timeout bounds one write (default 10 s).
	Timeout time.Duration
	// Logger logs failed writes (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, gets playhead_quality_dropped_total.
	Registerer prometheus.Registerer
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	c.Interval = cmp.Or(c.Interval, 10*time.Second)
	c.MaxMedia = cmp.Or(c.MaxMedia, 100_000)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

func (c Config) validate() error {
	if c.Pool == nil {
		return errors.New("quality: Pool is required")
	}
	if c.Interval < 0 || c.MaxMedia < 0 || c.Timeout < 0 {
		return errors.New("quality: Interval, MaxMedia and Timeout must not be negative")
	}
	return nil
}

// MaxHeights bounds the rendition heights a node holds time played for, per media and period.
const MaxHeights = 16

// sums are one media's counters since the last write.
type sums struct {
	sessions, rebuffers, rebufferMS int64
	errors                          [6]int64        // by Report.Error (1 … len(ErrorCodes))
	startup                         map[int32]int64 // rounded time to first frame → sessions
	played                          map[int32]int64 // height (0 unknown) → ms played
}

// Aggregator adds up reports per media in memory and writes the sums every Interval, and once
// more at Stop, into media_quality with one statement (value = value + the sum). A position
// report costs the node a map update under a lock; the database one row per (media, metric,
// bucket) per node per period, whatever the number of reports.
type Aggregator struct {
	cfg     Config
	loop    lifecycle.Loop
	dropped prometheus.Counter

	// mu guards pending: Add (request goroutines) writes it; the write loop swaps it out.
	mu      sync.Mutex
	pending map[int64]*sums
}

// New returns an Aggregator; Start begins its periodic writes.
func New(cfg Config) (*Aggregator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Aggregator{cfg: cfg, pending: map[int64]*sums{},
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "playhead", Subsystem: "quality", Name: "dropped_total",
			Help: "Playback-quality reports, and media of a failed write given back, dropped because the node held sums for PLAYHEAD_QUALITY_MAX_MEDIA media already."})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.dropped); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Add counts r, reported for mediaID (a media the member may play, checked by the caller).
func (a *Aggregator) Add(mediaID int64, r Report) {
	if r.Empty() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.pending[mediaID]
	if s == nil {
		if len(a.pending) >= a.cfg.MaxMedia {
			a.dropped.Inc()
			return
		}
		s = &sums{startup: map[int32]int64{}, played: map[int32]int64{}}
		a.pending[mediaID] = s
	}
	if r.Has&HasStartup != 0 {
		s.sessions++
		// A session that failed before its first frame has no startup time to rank.
		if r.Has&HasError == 0 {
			s.startup[StartupBucket(r.StartupMS)]++
		}
	}
	if r.Has&HasError != 0 {
		s.errors[r.Error]++
	}
	if r.Has&HasPlayed != 0 {
		var height int32
		if r.Has&HasHeight != 0 {
			height = r.Height
		}
		// A rendition ladder has a few heights; a player may say any of 8 640. Past MaxHeights
		// of one media the time played counts as of an unknown height, so a media's sums stay
		// small whatever its players say.
		if _, ok := s.played[height]; !ok && len(s.played) >= MaxHeights {
			height = 0
		}
		s.played[height] += int64(r.PlayedMS)
	}
	if r.Has&HasRebufferCount != 0 {
		s.rebuffers += int64(r.RebufferCount)
	}
	if r.Has&HasRebufferMS != 0 {
		s.rebufferMS += int64(r.RebufferMS)
	}
}

// StartupBucket rounds ms up to two significant digits (1234 → 1300): percentiles read from
// the buckets are within 10 %, and a media has at most about 90 buckets per decade.
func StartupBucket(ms int32) int32 {
	step := int32(1)
	for ms/step >= 100 {
		step *= 10
	}
	return (ms + step - 1) / step * step
}

// Start begins writing every Interval.
func (a *Aggregator) Start(ctx context.Context) error {
	return a.loop.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(a.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.writeLogged(ctx)
			}
		}
	})
}

// Stop ends the periodic writes and writes what is held one last time with ctx (the caller's,
// not the cancelled loop's): reports accepted before a graceful stop are not lost.
func (a *Aggregator) Stop(ctx context.Context) error {
	if err := a.loop.Stop(ctx); err != nil {
		return err
	}
	return a.Write(ctx)
}

func (a *Aggregator) writeLogged(ctx context.Context) {
	if err := a.Write(ctx); err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("write playback quality", "err", err)
	}
}

// counterRows are the arrays of the write statement (addSQL sorts them by key, so that nodes
// writing at once lock the rows in one order) and the media they touch, sorted.
type counterRows struct {
	media   []int64
	metric  []string
	bucket  []int32
	value   []int64
	touched []int64
}

// Write writes the sums held into media_quality now. A failed write gives them back to be
// written with the next one.
func (a *Aggregator) Write(ctx context.Context) error {
	a.mu.Lock()
	held := a.pending
	a.pending = map[int64]*sums{}
	a.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	rows := flatten(held)
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	var b pgx.Batch
	b.Queue(markSQL, rows.touched)
	b.Queue(addSQL, rows.media, rows.metric, rows.bucket, rows.value)
	if err := a.cfg.Pool.SendBatch(ctx, &b).Close(); err != nil {
		a.giveBack(held)
		return fmt.Errorf("write playback quality of %d media: %w", len(held), err)
	}
	return nil
}

// giveBack merges sums a failed write held into what arrived meanwhile, within MaxMedia: the
// reports of other media fill the node's map while a write waits on a database that is down,
// so the media of a failed write past MaxMedia are dropped and counted, as Add does, or every
// failed write would let the map grow by another MaxMedia.
func (a *Aggregator) giveBack(held map[int64]*sums) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, old := range held {
		s := a.pending[id]
		if s == nil {
			if len(a.pending) >= a.cfg.MaxMedia {
				a.dropped.Inc()
				continue
			}
			a.pending[id] = old
			continue
		}
		s.sessions += old.sessions
		s.rebuffers += old.rebuffers
		s.rebufferMS += old.rebufferMS
		for i, n := range old.errors {
			s.errors[i] += n
		}
		for k, n := range old.startup {
			s.startup[k] += n
		}
		for k, n := range old.played {
			s.played[k] += n
		}
	}
}

func flatten(held map[int64]*sums) counterRows {
	var r counterRows
	add := func(id int64, metric string, bucket int32, value int64) {
		if value > 0 {
			r.media, r.metric, r.bucket, r.value = append(r.media, id), append(r.metric, metric), append(r.bucket, bucket), append(r.value, value)
		}
	}
	ids := make([]int64, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	r.touched = ids
	for _, id := range ids {
		s := held[id]
		for i, n := range s.errors {
			add(id, "errors", int32(i), n)
		}
		for _, h := range slices.Sorted(maps.Keys(s.played)) {
			add(id, "played_ms", h, s.played[h])
		}
		add(id, "rebuffer_ms", 0, s.rebufferMS)
		add(id, "rebuffers", 0, s.rebuffers)
		add(id, "sessions", 0, s.sessions)
		for _, ms := range slices.Sorted(maps.Keys(s.startup)) {
			add(id, "startup", ms, s.startup[ms])
		}
	}
	return r
}

// markSQL marks the media written for the audience rollup as the playback flush does
// (playback's markAudienceSQL): a mark already there is locked until the write commits, so a
// rollup never takes a mark whose counters it cannot see yet.
const markSQL = `INSERT INTO audience_dirty (media_id) SELECT unnest($1::bigint[]) ORDER BY 1
ON CONFLICT (media_id) DO UPDATE SET media_id = excluded.media_id WHERE false`

// addSQL adds the sums to the counters, in key order. A media deleted since its reports were
// taken is skipped (its counters went with it, ON DELETE CASCADE).
const addSQL = `
INSERT INTO media_quality AS q (media_id, metric, bucket, value)
SELECT c.media_id, c.metric, c.bucket, c.value
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[]) AS c(media_id, metric, bucket, value)
JOIN media m ON m.id = c.media_id AND m.status <> 'DELETED'
ORDER BY c.media_id, c.metric, c.bucket
ON CONFLICT (media_id, metric, bucket) DO UPDATE SET value = q.value + excluded.value`
