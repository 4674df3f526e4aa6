package grafana_test

// The dashboard and alert check: the real playhead binary (run by internal/binarytest) under a
// little load (playback, client errors, a member over its rate limit, uploads that encode, one
// that is not a video, an import), scraped by a real Prometheus started from this folder's
// prometheus.yml and alerts.yml. Every expression of every dashboard panel and every alert
// rule is then evaluated through Prometheus' HTTP API and must parse and return at least one
// series with a value, and /metrics must match docs/operations/metrics.md. A renamed metric, a
// wrong label or a broken query fails here, not on an operator's screen.
//
// Timeouts only bound how long the check waits before giving up; nothing asserts a speed.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
)

const (
	// scrapeJob is the job_name of the scrape config in prometheus.yml.
	scrapeJob = "playhead"
	// committedTarget, committedScrape and committedEval are the parts of prometheus.yml the
	// check rewrites: the target becomes the test binary's metrics address, the intervals 1 s.
	committedTarget = "localhost:9464"
	committedScrape = "scrape_interval: 15s"
	committedEval   = "evaluation_interval: 15s"
	// rangeInterval replaces Grafana's $__rate_interval, $__interval and $__range: longer than
	// the whole run, so every event of the run is inside every panel's window.
	rangeInterval = "2m"

	readyTimeout  = 30 * time.Second // a process answers its readiness endpoint
	encodeTimeout = 3 * time.Minute  // an encode the check waits for is completed and scraped
	dataTimeout   = 2 * time.Minute  // every panel and rule has data, after the encodes
)

// encodesEnv makes the check's encodes faster or slower than usual, to show that the check
// waits on what it needs rather than on the machine's speed: "fast" uploads a 1 s 64×64 video,
// "slow" a 10 s 1280×720 one at the veryfast preset (four renditions). Unset: 2 s at 160×120,
// ultrafast.
const encodesEnv = "PLAYHEAD_GRAFANA_ENCODES"

// requiredRows are the dashboard's row titles; requiredAlerts the alert rules' names.
var (
	requiredRows   = []string{"HTTP", "Playback buffer", "Flush", "Outage", "Database pool", "Media cache", "Go runtime", "Media jobs", "Imports"}
	requiredAlerts = []string{
		"PlayheadPlaybackDrops", "PlayheadFlushFailures", "PlayheadPlaybackHeldForRetry", "PlayheadPlaybackLost", "PlayheadDBPoolSaturated",
		"PlayheadOldestPendingJob", "PlayheadDeadJobsIncreasing", "PlayheadInstanceDown",
	}
)

// TestDashboardAndAlertsAgainstPrometheus is the check described at the top of this file.
func TestDashboardAndAlertsAgainstPrometheus(t *testing.T) {
	prometheusBin := requireTool(t, "prometheus")
	promtool := requireTool(t, "promtool")

	// The committed files as an operator would check them.
	runTool(t, promtool, "check", "config", "prometheus.yml")
	runTool(t, promtool, "check", "rules", "alerts.yml")
	dash := loadDashboard(t, filepath.Join("dashboards", "playhead.json"))
	targets := checkDashboardModel(t, dash)
	alertsYAML, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}

	spec, preset := testvideo.Spec{Seconds: 2, Width: 160, Height: 120}, "ultrafast"
	switch os.Getenv(encodesEnv) {
	case "":
	case "fast":
		spec = testvideo.Spec{Seconds: 1, Width: 64, Height: 64}
	case "slow":
		spec, preset = testvideo.Spec{Seconds: 10, Width: 1280, Height: 720, Audio: true}, "veryfast"
	default:
		t.Fatalf("%s=%q: want fast, slow or nothing", encodesEnv, os.Getenv(encodesEnv))
	}
	videoPath := testvideo.MP4(t, t.TempDir(), spec)
	video, err := os.ReadFile(videoPath)
	if err != nil {
		t.Fatal(err)
	}
	host := binarytest.VideoHost(t, video)
	ph := startPlayhead(t, preset)
	prom := startPrometheus(t, prometheusBin, promtool, ph.MetricsAddr)

	// The first scrape must come before the load: the DEAD-jobs alert fires on an increase,
	// so Prometheus has to have seen the queue with no DEAD job.
	waitFor(t, readyTimeout, "Prometheus scraped playhead's queue gauges", func() error {
		s, err := prom.query(fmt.Sprintf(`playhead_jobs{job=%q, status="DEAD"} == 0`, scrapeJob))
		if err == nil && len(s) == 0 {
			err = errors.New("no sample yet")
		}
		return err
	})

	tr := startTraffic(t, ph, videoPath, host.URL)

	// The job duration panel is histogram_quantile over rate() of a histogram whose labelled
	// series is born with its first observation: rate() needs two scraped samples with an
	// increase between them. So wait until Prometheus has scraped the completed-encode series
	// once, then make another encode and wait until Prometheus has scraped its observation.
	// (Waiting on anything else, such as the outcome counters, which exist from start-up, lets
	// fast machines finish both encodes inside one scrape interval.)
	encodes := fmt.Sprintf(`playhead_jobs_duration_seconds_count{job=%q, kind="encode", outcome="completed"}`, scrapeJob)
	scraped := waitForValue(t, prom, encodes, "a completed encode in the job duration histogram", func(float64) bool { return true })
	tr.upload(t)
	completed := waitForValue(t, prom, encodes, fmt.Sprintf("another completed encode after Prometheus saw %v", scraped),
		func(v float64) bool { return v > scraped })
	if took, err := prom.query(strings.Replace(encodes, "_count", "_sum", 1)); err == nil && len(took) == 1 {
		t.Logf("%v encodes completed (%v when Prometheus first saw the series), %.2f s each on average (%s=%q)",
			completed, scraped, took[0].Value/completed, encodesEnv, os.Getenv(encodesEnv))
	}

	vars := map[string]string{
		"job": scrapeJob, "instance": ph.MetricsAddr,
		"__rate_interval": rangeInterval, "__interval": rangeInterval, "__range": rangeInterval,
	}
	deadline := time.Now().Add(dataTimeout)
	for {
		var p problems
		checkOnce(&p, prom, targets, vars, alertsYAML, ph.MetricsAddr)
		if len(p.all) == 0 {
			break
		}
		if len(p.fatal) > 0 {
			t.Fatalf("the dashboard or alert rules are wrong (%d problems):\n  %s", len(p.fatal), strings.Join(p.fatal, "\n  "))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard or alert rules do not show data from a live Prometheus (%d problems, after waiting %s):\n  %s",
				len(p.all), dataTimeout, strings.Join(p.all, "\n  "))
		}
		time.Sleep(time.Second)
	}
	checkMetricsDoc(t, ph.Metrics(t), filepath.Join("..", "docs", "operations", "metrics.md"))
	tr.stop(t)
	t.Logf("%d panel queries and %d alert rules verified against Prometheus", len(targets), strings.Count(string(alertsYAML), "- alert:"))
}

// waitForValue waits until the instant query expr returns one series whose value satisfies
// ok, and returns that value; it fails the test after encodeTimeout.
func waitForValue(t *testing.T, prom *prometheus, expr, what string, ok func(float64) bool) float64 {
	t.Helper()
	var value float64
	waitFor(t, encodeTimeout, "Prometheus has "+what, func() error {
		series, err := prom.query(expr)
		switch {
		case err != nil:
			return err
		case len(series) != 1:
			return fmt.Errorf("%s: %d series, want 1", expr, len(series))
		case !ok(series[0].Value):
			return fmt.Errorf("%s = %v", expr, series[0].Value)
		}
		value = series[0].Value
		return nil
	})
	return value
}

// TestProvisioningFiles checks Grafana's provisioning files against the rest of this folder:
// the dashboard provider loads the folder the dashboard is in, and the data source is a
// Prometheus whose scrape interval (the floor of $__rate_interval) is prometheus.yml's.
func TestProvisioningFiles(t *testing.T) {
	read := func(path string) string {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	ds := read(filepath.Join("provisioning", "datasources", "prometheus.yml"))
	scrape := strings.TrimPrefix(committedScrape, "scrape_interval: ")
	for _, want := range []string{"apiVersion: 1", "type: prometheus", "timeInterval: " + scrape} {
		if !strings.Contains(ds, want) {
			t.Errorf("provisioning/datasources/prometheus.yml has no %q", want)
		}
	}
	prov := read(filepath.Join("provisioning", "dashboards", "playhead.yml"))
	m := regexp.MustCompile(`(?m)^\s*path:\s*(\S+)\s*$`).FindStringSubmatch(prov)
	if m == nil {
		t.Fatal("provisioning/dashboards/playhead.yml has no options.path")
	}
	// Grafana expands ${GF_PATHS_PROVISIONING}; here it is this folder's provisioning/.
	dir := strings.ReplaceAll(m[1], "${GF_PATHS_PROVISIONING}", "provisioning")
	if _, err := os.Stat(filepath.Join(dir, "playhead.json")); err != nil {
		t.Errorf("the dashboard provider's path %s (%s here) does not hold playhead.json: %v", m[1], dir, err)
	}
}
