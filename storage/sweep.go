package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/lifecycle"
)

// SweepRule is one folder of the store that the orphan sweep looks after.
type SweepRule struct {
	// Prefix is the folder: "hls/", "uploads/".
	Prefix string
	// Depth is how many path segments below Prefix name a group of objects that are written
	// and deleted together: 2 for hls/{media}/{claim}/, 1 for uploads/{upload}/. Objects
	// higher up than a group are not the sweep's business and are left alone.
	Depth int
	// InUse returns the groups (Prefix plus Depth segments plus "/") of groups that something
	// still needs. The others are orphans.
	InUse func(ctx context.Context, groups []string) (map[string]bool, error)
}

// SweepConfig configures a Sweeper. Zero values take the defaults named on each field.
type SweepConfig struct {
	Store Store
	Rules []SweepRule
	// Grace is how old the newest object of an orphaned group must be before the group is
	// removed, and how old an unfinished write before it is aborted: longer than anything may
	// take between writing an object and recording it (an upload's whole time limit, a job's
	// lease). Default 24 h.
	Grace time.Duration
	// Interval is the time between passes. Default 10 min.
	Interval time.Duration
	// PassObjects bounds the objects one pass lists under each rule's prefix; the next pass
	// resumes after the last group it finished, and after the end starts again at the top.
	// Default 10 000.
	PassObjects int
	// Lock, when set, is tried before each pass: it returns ok false when another node holds
	// it (the pass is skipped), and unlock otherwise.
	Lock func(ctx context.Context) (unlock func(), ok bool, err error)
	// Logger gets what each pass removed and its errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts what the passes removed. Optional.
	Metrics *SweepMetrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c SweepConfig) withDefaults() SweepConfig {
	c.Grace = cmp.Or(c.Grace, 24*time.Hour)
	c.Interval = cmp.Or(c.Interval, 10*time.Minute)
	c.PassObjects = cmp.Or(c.PassObjects, 10_000)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c SweepConfig) validate() error {
	if c.Store == nil {
		return errors.New("storage: SweepConfig.Store is required")
	}
	for _, r := range c.Rules {
		if _, err := folder(r.Prefix); err != nil || r.Depth < 1 || r.InUse == nil {
			return fmt.Errorf("storage: sweep rule %q needs a folder prefix, a depth of at least 1 and InUse", r.Prefix)
		}
	}
	if c.Grace < 0 || c.Interval < 0 || c.PassObjects < 0 {
		return errors.New("storage: sweep Grace, Interval and PassObjects must not be negative")
	}
	return nil
}

// Sweeper removes orphaned objects: groups of objects that nothing references (a killed
// worker's half-written outputs, a killed import's download) and unfinished multipart
// uploads, once they are older than the grace period. It works in bounded passes, one every
// Interval, so a store of millions of objects is swept a slice at a time.
type Sweeper struct {
	cfg SweepConfig

	// cursors is where the next pass of each rule resumes; only the sweeping goroutine (or a
	// caller of Sweep, never both at once) touches it.
	cursors map[string]string

	loop lifecycle.Loop
}

// NewSweeper returns a Sweeper that does nothing until Start.
func NewSweeper(cfg SweepConfig) (*Sweeper, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var prefixes []string
	for _, r := range cfg.Rules {
		p, _ := folder(r.Prefix)
		prefixes = append(prefixes, p)
	}
	cfg.Metrics.init(prefixes)
	return &Sweeper{cfg: cfg, cursors: map[string]string{}}, nil
}

// Start launches the passes, the first one Interval from now. It is idempotent; after Stop it
// fails.
func (s *Sweeper) Start(ctx context.Context) error {
	return s.loop.Every(ctx, s.cfg.Interval, s.tick)
}

// Stop cancels a pass in progress and waits for the passes to end, at most until ctx ends. It
// is idempotent and safe when the sweeper never started.
func (s *Sweeper) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

func (s *Sweeper) tick(ctx context.Context) {
	if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("orphan sweep failed; the next pass tries again", "err", err)
	}
}

// SweepResult is what one pass removed.
type SweepResult struct {
	Groups, Objects, Bytes int64
	// Unfinished is how many unfinished writes were aborted.
	Unfinished int
	// Skipped is true when another node held the lock.
	Skipped bool
}

// Sweep runs one pass over every rule. Loop calls it every Interval; tests call it directly.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	if s.cfg.Lock != nil {
		unlock, ok, err := s.cfg.Lock(ctx)
		if err != nil {
			s.cfg.Metrics.pass("error")
			return res, fmt.Errorf("orphan sweep lock: %w", err)
		}
		if !ok {
			s.cfg.Metrics.pass("skipped")
			res.Skipped = true
			return res, nil
		}
		defer unlock()
	}
	var errs []error
	for _, rule := range s.cfg.Rules {
		errs = append(errs, s.sweepRule(ctx, rule, &res))
	}
	err := errors.Join(errs...)
	if err != nil {
		s.cfg.Metrics.pass("error")
	} else {
		s.cfg.Metrics.pass("ok")
	}
	if res.Groups > 0 || res.Unfinished > 0 {
		s.cfg.Logger.Info("orphan sweep removed objects", "groups", res.Groups, "objects", res.Objects, "bytes", res.Bytes,
			"unfinished_writes", res.Unfinished)
	}
	return res, err
}

// group is a run of listed objects that share one group prefix.
type group struct {
	prefix  string
	lastKey string
	objects int64
	bytes   int64
	newest  time.Time
}

func (s *Sweeper) sweepRule(ctx context.Context, rule SweepRule, res *SweepResult) error {
	prefix, _ := folder(rule.Prefix)
	cutoff := s.cfg.Now().Add(-s.cfg.Grace)
	var errs []error
	if u, ok := s.cfg.Store.(UnfinishedWrites); ok {
		n, err := s.abortUnfinished(ctx, u, rule, prefix, cutoff)
		res.Unfinished += n
		s.cfg.Metrics.unfinished(prefix, n)
		errs = append(errs, err)
	}
	groups, err := s.listGroups(ctx, rule, prefix)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for start := 0; start < len(groups); start += inUseChunk {
		batch := groups[start:min(start+inUseChunk, len(groups))]
		var names []string
		for _, g := range batch {
			if g.newest.Before(cutoff) {
				names = append(names, g.prefix)
			}
		}
		if len(names) == 0 {
			continue
		}
		inUse, err := rule.InUse(ctx, names)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("orphan sweep of %s: %w", prefix, err))...)
		}
		for _, g := range batch {
			if !g.newest.Before(cutoff) || inUse[g.prefix] {
				continue
			}
			if err := s.cfg.Store.DeletePrefix(ctx, g.prefix); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Groups++
			res.Objects += g.objects
			res.Bytes += g.bytes
			s.cfg.Metrics.removed(prefix, g.objects, g.bytes)
		}
	}
	return errors.Join(errs...)
}

// abortUnfinished aborts the unfinished writes under the rule's prefix started before cutoff,
// except those of a group in use: a resumable upload writes one multipart upload for as long as
// its client keeps resuming it, which can be longer than the grace period. A write
// higher up than a group has no group to keep it and is aborted.
func (s *Sweeper) abortUnfinished(ctx context.Context, u UnfinishedWrites, rule SweepRule, prefix string, cutoff time.Time) (int, error) {
	var writes []UnfinishedWrite
	var names []string
	seen := map[string]bool{}
	for w, err := range u.Unfinished(ctx, prefix, cutoff) {
		if err != nil {
			return 0, err
		}
		writes = append(writes, w)
		if g := groupOf(prefix, rule.Depth, w.Key); g != "" && !seen[g] {
			seen[g] = true
			names = append(names, g)
		}
	}
	inUse := map[string]bool{}
	for start := 0; start < len(names); start += inUseChunk {
		used, err := rule.InUse(ctx, names[start:min(start+inUseChunk, len(names))])
		if err != nil {
			return 0, fmt.Errorf("orphan sweep of %s: %w", prefix, err)
		}
		maps.Copy(inUse, used)
	}
	aborted := 0
	var errs []error
	for _, w := range writes {
		if inUse[groupOf(prefix, rule.Depth, w.Key)] {
			continue
		}
		if err := u.AbortWrite(ctx, w); err != nil {
			errs = append(errs, err)
			continue
		}
		aborted++
	}
	return aborted, errors.Join(errs...)
}

// inUseChunk bounds the groups of one InUse call, so that one query's arrays stay small.
const inUseChunk = 500

// listGroups lists the next slice of the rule's folder, from its cursor on, and returns the
// groups it saw whole. It stops at the first group boundary past PassObjects objects and
// moves the cursor there; at the end of the folder the cursor goes back to the top.
func (s *Sweeper) listGroups(ctx context.Context, rule SweepRule, prefix string) ([]group, error) {
	var groups []group
	var cur *group
	listed := 0
	exhausted := true
	for obj, err := range s.cfg.Store.List(ctx, prefix, s.cursors[prefix]) {
		if err != nil {
			return nil, err
		}
		name := groupOf(prefix, rule.Depth, obj.Key)
		if cur != nil && name != cur.prefix {
			groups = append(groups, *cur)
			cur = nil
			if listed >= s.cfg.PassObjects {
				exhausted = false
				break
			}
		}
		listed++
		if name == "" {
			continue
		}
		if cur == nil {
			cur = &group{prefix: name}
		}
		cur.lastKey = obj.Key
		cur.objects++
		cur.bytes += obj.Size
		if obj.ModTime.After(cur.newest) {
			cur.newest = obj.ModTime
		}
	}
	if cur != nil {
		groups = append(groups, *cur)
	}
	switch {
	case exhausted:
		delete(s.cursors, prefix)
	case len(groups) > 0:
		s.cursors[prefix] = groups[len(groups)-1].lastKey
	}
	return groups, nil
}

// groupOf returns the group of key under prefix (prefix plus depth segments plus "/"), or ""
// for an object that sits higher up than a group.
func groupOf(prefix string, depth int, key string) string {
	parts := strings.SplitN(strings.TrimPrefix(key, prefix), "/", depth+1)
	if len(parts) <= depth {
		return ""
	}
	return prefix + strings.Join(parts[:depth], "/") + "/"
}

// SweepMetrics counts what the orphan sweep removed.
type SweepMetrics struct {
	objects, bytes, unfinishedAborted *prometheus.CounterVec
	passes                            *prometheus.CounterVec
}

// NewSweepMetrics registers the sweep's metrics with reg.
func NewSweepMetrics(reg prometheus.Registerer) *SweepMetrics {
	m := &SweepMetrics{
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "storage", Name: "orphan_objects_removed_total",
			Help: "Orphaned objects (referenced by no media, owned by no running claim, older than the grace period) the sweep removed, by folder.",
		}, []string{"prefix"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "storage", Name: "orphan_bytes_removed_total",
			Help: "Bytes of the orphaned objects the sweep removed, by folder.",
		}, []string{"prefix"}),
		unfinishedAborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "storage", Name: "orphan_unfinished_writes_aborted_total",
			Help: "Unfinished multipart uploads older than the grace period that the sweep aborted, by folder.",
		}, []string{"prefix"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "storage", Name: "orphan_sweeps_total",
			Help: "Orphan sweep passes by result: ok, error, or skipped (another node was sweeping).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.objects, m.bytes, m.unfinishedAborted, m.passes)
	return m
}

// init makes every series exist from the start, at 0, so that rates and alerts see the first
// removal.
func (m *SweepMetrics) init(prefixes []string) {
	if m == nil {
		return
	}
	for _, p := range prefixes {
		m.objects.WithLabelValues(p)
		m.bytes.WithLabelValues(p)
		m.unfinishedAborted.WithLabelValues(p)
	}
	for _, r := range []string{"ok", "error", "skipped"} {
		m.passes.WithLabelValues(r)
	}
}

func (m *SweepMetrics) removed(prefix string, objects, bytes int64) {
	if m != nil {
		m.objects.WithLabelValues(prefix).Add(float64(objects))
		m.bytes.WithLabelValues(prefix).Add(float64(bytes))
	}
}

func (m *SweepMetrics) unfinished(prefix string, n int) {
	if m != nil && n > 0 {
		m.unfinishedAborted.WithLabelValues(prefix).Add(float64(n))
	}
}

func (m *SweepMetrics) pass(result string) {
	if m != nil {
		m.passes.WithLabelValues(result).Inc()
	}
}
