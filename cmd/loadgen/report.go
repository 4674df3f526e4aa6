package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/internal/proccpu"
)

// report is what one run measured. Exported fields go into the JSON report.
type report struct {
	Label   string        `json:"label,omitempty"`
	Players int           `json:"players"`
	Targets []string      `json:"targets"`
	Start   time.Time     `json:"start"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Measured is the steady-state window the rates and latencies describe (after the ramp).
	Measured time.Duration `json:"measured_ns"`
	Ops      []opReport    `json:"ops"`
	Total    opReport      `json:"total"`
	// Warmup counts the answers to requests scheduled during the ramp.
	Warmup   opReport      `json:"warmup"`
	Server   serverFigures `json:"server"`
	Database *dbFigures    `json:"database,omitempty"`
	// Refused counts the 401 answers of the whole run, ramp included, by the key of the
	// token refused: a key rotation's run must have none.
	Refused refusals `json:"refused"`
	// RotateAt is when the players switched to the rotated key's tokens (0: no rotation).
	RotateAt time.Duration `json:"rotate_at_ns,omitempty"`

	measureFrom time.Time

	mu    sync.Mutex
	hists [opCount]*hdrhistogram.Histogram
	all   *hdrhistogram.Histogram
	ops   [opCount]opReport
}

type opReport struct {
	Name        string         `json:"name"`
	Sent        int64          `json:"sent"`
	ClientDrops int64          `json:"client_drops"`
	Statuses    map[int]int64  `json:"statuses"`
	Errors      map[string]int `json:"errors,omitempty"`
	RatePerSec  float64        `json:"achieved_per_sec"`
	P50, P95    time.Duration  `json:"-"`
	P99, Max    time.Duration  `json:"-"`
	Percentiles map[string]float64
}

// refusals are the 401 answers, by key, and when the first and last were sent (offsets from
// the start).
type refusals struct {
	FirstKey   int64         `json:"first_key"`
	RotatedKey int64         `json:"rotated_key"`
	First      time.Duration `json:"first_ns,omitempty"`
	Last       time.Duration `json:"last_ns,omitempty"`
}

type serverFigures struct {
	Scraped         bool    `json:"scraped"`
	Lost            float64 `json:"buffer_lost"`
	Offered         float64 `json:"buffer_offered"`
	Flushes         float64 `json:"flushes"`
	FlushedRows     float64 `json:"flushed_rows"`
	FlushFailures   float64 `json:"flush_failures"`
	EmptyAcquires   float64 `json:"pool_empty_acquires"`
	AcquireWaitSec  float64 `json:"pool_acquire_wait_seconds"`
	PeakAcquired    float64 `json:"peak_pool_acquired"`
	PeakBufferDepth float64 `json:"peak_buffer_depth"`
	PeakHeldKeys    float64 `json:"peak_held_keys"`
	PeakRSSBytes    float64 `json:"peak_rss_bytes"`
	CacheLoads      float64 `json:"cache_loads"`
	FlushP99Seconds float64 `json:"flush_p99_seconds"`
}

type dbFigures struct {
	Transactions float64 `json:"transactions"`
	PerSec       float64 `json:"transactions_per_sec"`
	RowsWritten  float64 `json:"rows_written"`
	RowsPerSec   float64 `json:"rows_written_per_sec"`
	// The server's CPU (its postmaster and every child), when it runs on this machine: in
	// all, per row written, the cores it kept busy on average, and the players one of its
	// cores would serve at this run's rows per player.
	CPUSeconds     float64 `json:"cpu_seconds,omitempty"`
	CPUPerRowUS    float64 `json:"cpu_us_per_row,omitempty"`
	Cores          float64 `json:"cores_busy,omitempty"`
	PlayersPerCore float64 `json:"players_per_core,omitempty"`
	// Held is the same after the ramp only: every player's opening POST falls in the ramp,
	// and so does the first row of each of its keys, so this is what a player costs once it
	// is watching (nil without a ramp or when the sample at its end failed).
	Held                  *dbHeld `json:"after_ramp,omitempty"`
	before, ramped, after dbSample
	rampedOK              bool
}

// dbHeld is the database's work after the ramp: rows written a second, and its CPU per row,
// in cores and in players per core.
type dbHeld struct {
	RowsPerSec     float64 `json:"rows_written_per_sec"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	CPUPerRowUS    float64 `json:"cpu_us_per_row"`
	Cores          float64 `json:"cores_busy"`
	PlayersPerCore float64 `json:"players_per_core"`
}

// dbSample is the database's counters at one moment; cpu is negative when the server is not
// a process of this machine.
type dbSample struct{ transactions, rows, cpu float64 }

func newReport(o options) *report {
	r := &report{Label: o.label, Players: o.players, Targets: o.targets}
	if o.rotate != nil {
		r.RotateAt = o.rotateAt
	}
	newHist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(2*time.Minute/time.Microsecond), 3) }
	for i := range r.hists {
		r.hists[i] = newHist()
		r.ops[i] = opReport{Name: opNames[i], Statuses: map[int]int64{}, Errors: map[string]int{}}
	}
	r.all = newHist()
	r.Warmup = opReport{Name: "ramp", Statuses: map[int]int64{}, Errors: map[string]int{}}
	return r
}

// record counts one answered (or failed) request. Latency is measured from when the schedule
// said to send it, so time spent queued in the client counts too (no coordinated omission).
func (r *report) record(req request, err error, resp *fasthttp.Response) {
	us := max(1, time.Since(req.created).Microseconds())
	r.mu.Lock()
	defer r.mu.Unlock()
	o := &r.ops[req.op]
	warm := req.created.Before(r.measureFrom)
	if warm {
		o = &r.Warmup
	}
	o.Sent++
	if err != nil {
		o.Errors[errorClass(err)]++
		return
	}
	o.Statuses[resp.StatusCode()]++
	if resp.StatusCode() == fasthttp.StatusUnauthorized {
		r.refused(req)
	}
	if !warm {
		_ = r.hists[req.op].RecordValue(us)
		_ = r.all.RecordValue(us)
	}
}

// refused counts a 401 answer to req. Called under mu.
func (r *report) refused(req request) {
	f := &r.Refused
	if req.rotated {
		f.RotatedKey++
	} else {
		f.FirstKey++
	}
	at := req.created.Sub(r.Start)
	if f.FirstKey+f.RotatedKey == 1 {
		f.First = at
	}
	f.First, f.Last = min(f.First, at), max(f.Last, at)
}

func (r *report) clientDrop(o op, scheduled time.Time) {
	r.mu.Lock()
	if scheduled.Before(r.measureFrom) {
		r.Warmup.ClientDrops++
	} else {
		r.ops[o].ClientDrops++
	}
	r.mu.Unlock()
}

func errorClass(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, fasthttp.ErrConnPoolStrategyNotImpl):
		return "no free connection"
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "connection refused"):
		return "connection refused"
	case strings.Contains(s, "reset by peer"), strings.Contains(s, "broken pipe"), strings.Contains(s, "closed"):
		return "connection closed"
	}
	return "other: " + s
}

func (r *report) finish() {
	secs := r.Measured.Seconds()
	total := opReport{Name: "all", Statuses: map[int]int64{}, Errors: map[string]int{}}
	for i := range r.ops {
		o := &r.ops[i]
		o.RatePerSec = float64(o.Sent) / secs
		fillPercentiles(o, r.hists[i])
		total.Sent += o.Sent
		total.ClientDrops += o.ClientDrops
		for k, v := range o.Statuses {
			total.Statuses[k] += v
		}
		for k, v := range o.Errors {
			total.Errors[k] += v
		}
	}
	total.RatePerSec = float64(total.Sent) / secs
	fillPercentiles(&total, r.all)
	r.Ops = r.ops[:]
	r.Total = total
	if d := r.Database; d != nil {
		d.Transactions = d.after.transactions - d.before.transactions
		d.RowsWritten = d.after.rows - d.before.rows
		// The database works through the ramp too.
		d.PerSec = d.Transactions / r.Elapsed.Seconds()
		d.RowsPerSec = d.RowsWritten / r.Elapsed.Seconds()
		if c, ok := cpuBetween(d.before, d.after, r.Elapsed.Seconds(), r.Players); ok {
			d.CPUSeconds, d.CPUPerRowUS, d.Cores, d.PlayersPerCore = c.seconds, c.perRowUS, c.cores, c.playersPerCore
		}
		if c, ok := cpuBetween(d.ramped, d.after, secs, r.Players); d.rampedOK && ok && secs > 0 {
			d.Held = &dbHeld{RowsPerSec: (d.after.rows - d.ramped.rows) / secs,
				CPUSeconds: c.seconds, CPUPerRowUS: c.perRowUS, Cores: c.cores, PlayersPerCore: c.playersPerCore}
		}
	}
}

// dbCPU is the database server's CPU between two samples: in all, per row written, the cores
// it kept busy over secs, and the players of the run one of its cores would serve.
type dbCPU struct{ seconds, perRowUS, cores, playersPerCore float64 }

// cpuBetween is dbCPU from sample from to sample to, over secs; false when either sample has
// no CPU reading or no row was written between them.
func cpuBetween(from, to dbSample, secs float64, players int) (dbCPU, bool) {
	rows := to.rows - from.rows
	if from.cpu < 0 || to.cpu < 0 || rows <= 0 {
		return dbCPU{}, false
	}
	c := dbCPU{seconds: to.cpu - from.cpu}
	c.perRowUS = c.seconds / rows * 1e6
	c.cores = c.seconds / secs
	if c.cores > 0 {
		c.playersPerCore = float64(players) / c.cores
	}
	return c, true
}

func fillPercentiles(o *opReport, h *hdrhistogram.Histogram) {
	us := func(q float64) time.Duration { return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond }
	o.P50, o.P95, o.P99, o.Max = us(50), us(95), us(99), time.Duration(h.Max())*time.Microsecond
	o.Percentiles = map[string]float64{"p50_ms": ms(o.P50), "p95_ms": ms(o.P95), "p99_ms": ms(o.P99), "max_ms": ms(o.Max)}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "run %q: %d players over %s, %d target(s); rates and latencies over the last %s (after the ramp)\n",
		r.Label, r.Players, r.Elapsed.Round(time.Millisecond), len(r.Targets), r.Measured.Round(time.Millisecond))
	fmt.Fprintf(w, "%-13s %9s %9s %8s %8s %8s %8s %8s  %s\n", "request", "sent", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "c.drops", "statuses / errors")
	for _, o := range append(r.Ops, r.Total, r.Warmup) {
		fmt.Fprintf(w, "%-13s %9d %9.0f %8.2f %8.2f %8.2f %8.1f %8d  %s\n", o.Name, o.Sent, o.RatePerSec,
			ms(o.P50), ms(o.P95), ms(o.P99), ms(o.Max), o.ClientDrops, outcomes(o))
	}
	if f := r.Refused; r.RotateAt > 0 || f.FirstKey+f.RotatedKey > 0 {
		fmt.Fprintf(w, "refused (401): %d with the first key's tokens, %d with the rotated key's", f.FirstKey, f.RotatedKey)
		if f.FirstKey+f.RotatedKey > 0 {
			fmt.Fprintf(w, ", sent from +%s to +%s", f.First.Round(time.Millisecond), f.Last.Round(time.Millisecond))
		}
		if r.RotateAt > 0 {
			fmt.Fprintf(w, "; players switched keys at +%s (%s)", r.RotateAt, r.Start.Add(r.RotateAt).UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
	s := r.Server
	if s.Scraped {
		fmt.Fprintf(w, "server: buffer offered %.0f, lost %.0f, peak depth %.0f, peak held keys %.0f; flushes %.0f (p99 %.1f ms), rows %.0f, failures %.0f\n",
			s.Offered, s.Lost, s.PeakBufferDepth, s.PeakHeldKeys, s.Flushes, s.FlushP99Seconds*1000, s.FlushedRows, s.FlushFailures)
		fmt.Fprintf(w, "server: pool peak acquired %.0f, empty acquires %.0f, acquire wait %.3f s; cache loads %.0f; peak RSS %.1f MiB\n",
			s.PeakAcquired, s.EmptyAcquires, s.AcquireWaitSec, s.CacheLoads, s.PeakRSSBytes/(1<<20))
	}
	if d := r.Database; d != nil {
		fmt.Fprintf(w, "database: %.0f transactions (%.1f/s), %.0f rows inserted or updated (%.0f/s)\n", d.Transactions, d.PerSec, d.RowsWritten, d.RowsPerSec)
		if d.CPUSeconds > 0 {
			fmt.Fprintf(w, "database CPU: %.1f s, %.1f µs per row written, %.2f cores busy on average: one core serves %.0f players at this run's rows per player\n",
				d.CPUSeconds, d.CPUPerRowUS, d.Cores, d.PlayersPerCore)
		}
		if h := d.Held; h != nil {
			fmt.Fprintf(w, "database after the ramp (the openings left out): %.0f rows written/s, CPU %.1f s, %.1f µs per row, %.2f cores busy: one core serves %.0f players\n",
				h.RowsPerSec, h.CPUSeconds, h.CPUPerRowUS, h.Cores, h.PlayersPerCore)
		}
	}
}

func outcomes(o opReport) string {
	var parts []string
	codes := make([]int, 0, len(o.Statuses))
	for c := range o.Statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, o.Statuses[c]))
	}
	for e, n := range o.Errors {
		parts = append(parts, fmt.Sprintf("%s×%d", e, n))
	}
	return strings.Join(parts, " ")
}

// scraper reads the servers' /metrics and the database's counters.
type scraper struct {
	o      options
	client http.Client

	countersBefore map[string]float64
	flushBefore    *dto.Histogram
	dbBefore       dbSample
	// dbRamped is the database's counters when the ramp ends (sampleRamped), closed unsent
	// when that sample failed or there is none to take.
	dbRamped chan dbSample

	mu    sync.Mutex // guards peaks: written by sample and after
	peaks map[string]float64
}

func newScraper(o options) *scraper {
	return &scraper{o: o, client: http.Client{Timeout: 5 * time.Second}, peaks: map[string]float64{}, dbRamped: make(chan dbSample, 1)}
}

// sampleRamped reads the database's counters at the end of the ramp, at, unless ctx ends first.
// Run it in its own goroutine; after waits for it.
func (s *scraper) sampleRamped(ctx context.Context, at time.Time) {
	defer close(s.dbRamped)
	if s.o.databaseURL == "" || !at.After(time.Now()) {
		return
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if v, err := dbCounters(ctx, s.o.databaseURL); err == nil {
		s.dbRamped <- v
	}
}

// counters are summed over every scraped node, before and after.
var counters = []string{
	"playhead_playback_buffer_lost_total", "playhead_playback_buffer_offered_total",
	"playhead_playback_buffer_flushed_rows_total", "playhead_playback_buffer_flush_failures_total",
	"playhead_db_pool_empty_acquires_total", "playhead_db_pool_acquire_wait_seconds_total",
	"playhead_media_cache_loads_total",
}

// peakGauges are sampled every second during the run; the report keeps the highest sum.
var peakGauges = []string{"playhead_db_pool_acquired_conns", "playhead_playback_buffer_depth", "playhead_playback_buffer_held_keys",
	"process_resident_memory_bytes"}

func (s *scraper) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	merged := map[string]*dto.MetricFamily{}
	for _, u := range s.o.metricsURLs {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := s.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", u, err)
		}
		for name, f := range fams {
			if m, ok := merged[name]; ok {
				m.Metric = append(m.Metric, f.Metric...)
			} else {
				merged[name] = f
			}
		}
	}
	return merged, nil
}

func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var total float64
	for _, m := range f.Metric {
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// flushHistogram merges the nodes' flush-duration histograms.
func flushHistogram(fams map[string]*dto.MetricFamily) *dto.Histogram {
	f, ok := fams["playhead_playback_buffer_flush_duration_seconds"]
	if !ok || len(f.Metric) == 0 {
		return nil
	}
	out := &dto.Histogram{}
	var count uint64
	byBound := map[float64]uint64{}
	for _, m := range f.Metric {
		count += m.Histogram.GetSampleCount()
		for _, b := range m.Histogram.Bucket {
			byBound[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	bounds := make([]float64, 0, len(byBound))
	for b := range byBound {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	for _, b := range bounds {
		out.Bucket = append(out.Bucket, &dto.Bucket{UpperBound: &b, CumulativeCount: ptr(byBound[b])})
	}
	out.SampleCount = &count
	return out
}

func ptr[T any](v T) *T { return &v }

func (s *scraper) before(ctx context.Context) error {
	if len(s.o.metricsURLs) > 0 {
		fams, err := s.scrape(ctx)
		if err != nil {
			return err
		}
		before := map[string]float64{}
		for _, c := range counters {
			before[c] = sum(fams, c)
		}
		s.countersBefore = before
		s.flushBefore = flushHistogram(fams)
	}
	if s.o.databaseURL != "" {
		v, err := dbCounters(ctx, s.o.databaseURL)
		if err != nil {
			return err
		}
		s.dbBefore = v
	}
	return nil
}

func (s *scraper) sample(ctx context.Context) {
	if len(s.o.metricsURLs) == 0 {
		return
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fams, err := s.scrape(ctx)
			if err != nil {
				continue
			}
			s.mu.Lock()
			for _, g := range peakGauges {
				s.peaks[g] = max(s.peaks[g], sum(fams, g))
			}
			s.mu.Unlock()
		}
	}
}

func (s *scraper) after(ctx context.Context, r *report) error {
	if len(s.o.metricsURLs) > 0 {
		fams, err := s.scrape(ctx)
		if err != nil {
			return err
		}
		delta := func(name string) float64 { return sum(fams, name) - s.countersBefore[name] }
		s.mu.Lock()
		for _, g := range peakGauges {
			s.peaks[g] = max(s.peaks[g], sum(fams, g))
		}
		r.Server = serverFigures{
			Scraped:         true,
			Lost:            delta("playhead_playback_buffer_lost_total"),
			Offered:         delta("playhead_playback_buffer_offered_total"),
			FlushedRows:     delta("playhead_playback_buffer_flushed_rows_total"),
			FlushFailures:   delta("playhead_playback_buffer_flush_failures_total"),
			EmptyAcquires:   delta("playhead_db_pool_empty_acquires_total"),
			AcquireWaitSec:  delta("playhead_db_pool_acquire_wait_seconds_total"),
			CacheLoads:      delta("playhead_media_cache_loads_total"),
			PeakAcquired:    s.peaks["playhead_db_pool_acquired_conns"],
			PeakBufferDepth: s.peaks["playhead_playback_buffer_depth"],
			PeakHeldKeys:    s.peaks["playhead_playback_buffer_held_keys"],
			PeakRSSBytes:    s.peaks["process_resident_memory_bytes"],
		}
		s.mu.Unlock()
		r.Server.Flushes, r.Server.FlushP99Seconds = flushDelta(s.flushBefore, flushHistogram(fams))
	}
	if s.o.databaseURL != "" {
		v, err := dbCounters(ctx, s.o.databaseURL)
		if err != nil {
			return err
		}
		r.Database = &dbFigures{before: s.dbBefore, after: v}
		r.Database.ramped, r.Database.rampedOK = <-s.dbRamped
	}
	return nil
}

// flushDelta returns the flushes during the run and an upper-bound estimate of their p99
// (the bucket boundary the 99th percentile falls in).
func flushDelta(before, after *dto.Histogram) (count, p99 float64) {
	if after == nil {
		return 0, 0
	}
	base := map[float64]uint64{}
	var baseCount uint64
	if before != nil {
		baseCount = before.GetSampleCount()
		for _, b := range before.Bucket {
			base[b.GetUpperBound()] = b.GetCumulativeCount()
		}
	}
	n := after.GetSampleCount() - baseCount
	if n == 0 {
		return 0, 0
	}
	for _, b := range after.Bucket {
		if float64(b.GetCumulativeCount()-base[b.GetUpperBound()]) >= 0.99*float64(n) {
			return float64(n), b.GetUpperBound()
		}
	}
	return float64(n), 0
}

// dbCounters reads the database's committed+rolled-back transactions and written rows, and
// its server's CPU time when the server runs on this machine (proccpu).
func dbCounters(ctx context.Context, url string) (dbSample, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return dbSample{}, fmt.Errorf("database: %w", err)
	}
	defer conn.Close(ctx)
	v := dbSample{cpu: -1}
	var backend int
	err = conn.QueryRow(ctx, `
		SELECT (xact_commit + xact_rollback)::float8, (tup_inserted + tup_updated)::float8, pg_backend_pid()
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&v.transactions, &v.rows, &backend)
	if cpu, cpuErr := proccpu.PostgreSQL(backend); err == nil && cpuErr == nil {
		v.cpu = cpu.Seconds()
	}
	return v, err
}

// markdownHeader is the header of the rows markdownRow writes. Rates and latencies are of the
// steady state after the ramp; errors, drops and database figures of the whole run.
const markdownHeader = "| players | offered req/s | achieved req/s | PUT p50 / p95 / p99 ms | all p99 ms | errors | client drops | server drops | DB tx/s (whole run) | peak pool acquired | peak RSS MiB |\n" +
	"| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

// markdownRow is the run as one row of markdownHeader's table. Errors are answers other than
// 2xx plus transport errors.
func (r *report) markdownRow() string {
	put := r.Ops[opPut]
	var errs int64
	for _, o := range []opReport{r.Total, r.Warmup} {
		for code, n := range o.Statuses {
			if code < 200 || code > 299 {
				errs += n
			}
		}
		for _, n := range o.Errors {
			errs += int64(n)
		}
	}
	offered := float64(r.Total.Sent+r.Total.ClientDrops) / r.Measured.Seconds()
	db := "—"
	if r.Database != nil {
		db = fmt.Sprintf("%.0f", r.Database.PerSec)
	}
	return fmt.Sprintf("| %d | %.0f | %.0f | %.2f / %.2f / %.2f | %.2f | %d | %d | %.0f | %s | %.0f | %.0f |",
		r.Players, offered, r.Total.RatePerSec, ms(put.P50), ms(put.P95), ms(put.P99), ms(r.Total.P99),
		errs, r.Total.ClientDrops+r.Warmup.ClientDrops, r.Server.Lost, db, r.Server.PeakAcquired, r.Server.PeakRSSBytes/(1<<20))
}
