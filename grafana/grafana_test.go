package grafana_test

// The dashboard and alert check: the real playhead binary under a little load (playback,
// client errors, a member over its rate limit, uploads that encode, one that is not a video,
// an import), scraped by a real Prometheus started from this folder's prometheus.yml and
// alerts.yml. Every expression of every dashboard panel and every alert rule is then evaluated
// through Prometheus' HTTP API and must parse and return at least one series with a value, and
// /metrics must match docs/metrics.md. A renamed metric, a wrong label or a broken query fails
// here, not on an operator's screen.
//
// Timeouts only bound how long the check waits before giving up; nothing asserts a speed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/testvideo"
)

const (
	// testSecret signs the check's tokens (at least auth.MinSecretBytes long).
	testSecret = "grafana-check-secret-grafana-check-0123"
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

	readyTimeout = 30 * time.Second // a process answers its readiness endpoint
	dataTimeout  = 45 * time.Second // every panel and rule has data, after the load started
	stopTimeout  = 20 * time.Second // a process exits after SIGTERM
)

// requiredRows are the dashboard's row titles; requiredAlerts the alert rules' names.
var (
	requiredRows   = []string{"HTTP", "Playback buffer", "Flush", "Database pool", "Media cache", "Go runtime", "Media jobs", "Imports"}
	requiredAlerts = []string{
		"PlayheadPlaybackDrops", "PlayheadFlushFailures", "PlayheadDBPoolSaturated",
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

	video, err := os.ReadFile(testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 160, Height: 120}))
	if err != nil {
		t.Fatal(err)
	}
	host := videoHost(t, video)
	ph := startPlayhead(t)
	prom := startPrometheus(t, prometheusBin, promtool, ph.metricsAddr)

	// The first scrape must come before the load: the DEAD-jobs alert fires on an increase,
	// so Prometheus has to have seen the queue with no DEAD job.
	waitFor(t, readyTimeout, "Prometheus scraped playhead's queue gauges", func() error {
		s, err := prom.query(fmt.Sprintf(`playhead_jobs{job=%q, status="DEAD"} == 0`, scrapeJob))
		if err == nil && len(s) == 0 {
			err = errors.New("no sample yet")
		}
		return err
	})

	load := startLoad(ph)
	load.video = video
	load.setup(t, host.URL)

	vars := map[string]string{
		"job": scrapeJob, "instance": ph.metricsAddr,
		"__rate_interval": rangeInterval, "__interval": rangeInterval, "__range": rangeInterval,
	}
	secondEncode := false
	deadline := time.Now().Add(dataTimeout)
	for {
		// A labelled series is born with its first increment, which rate() cannot see: the
		// job duration panel gets a value once another encode completes after Prometheus has
		// seen the series.
		if !secondEncode {
			s, err := prom.query(fmt.Sprintf(`playhead_jobs_outcomes_total{job=%q, kind="encode", outcome="completed"}`, scrapeJob))
			if err == nil && len(s) > 0 {
				load.uploadVideo(t)
				secondEncode = true
			}
		}
		var p problems
		checkOnce(&p, prom, targets, vars, alertsYAML, ph.metricsAddr)
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
	checkMetricsDoc(t, ph.metricsAddr, filepath.Join("..", "docs", "metrics.md"))
	load.stop(t)
	t.Logf("%d panel queries and %d alert rules verified against Prometheus", len(targets), strings.Count(string(alertsYAML), "- alert:"))
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

// ---------------------------------------------------------------------------------------
// Checks

// problems collects what is wrong with the dashboard or the rules. A fatal problem is one
// that waiting for more data cannot fix, such as a query that does not parse.
type problems struct{ all, fatal []string }

func (p *problems) add(fatal bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.all = append(p.all, msg)
	if fatal {
		p.fatal = append(p.fatal, msg)
	}
}

// checkOnce evaluates every panel target, the template variables and every alert rule once.
func checkOnce(p *problems, prom *prometheus, targets []dashTarget, vars map[string]string, alertsYAML []byte, instance string) {
	names, _ := prom.labelValues("__name__", "")
	for _, tg := range targets {
		expr, err := substitute(tg.Expr, vars)
		if err != nil {
			p.add(true, "panel %q target %s: %v", tg.Panel, tg.RefID, err)
			continue
		}
		if msg, fatal := checkSeries(prom, expr, legendLabels(tg.Legend)); msg != "" {
			p.add(fatal, "panel %q target %s: %s%s\n      query: %s", tg.Panel, tg.RefID, msg, unknownMetrics(expr, names), expr)
		}
	}
	for _, v := range []struct{ label, match, want string }{
		{"job", "playhead_db_pool_max_conns", scrapeJob},
		{"instance", fmt.Sprintf(`playhead_db_pool_max_conns{job=~%q}`, scrapeJob), instance},
	} {
		values, err := prom.labelValues(v.label, v.match)
		if err != nil || !slices.Contains(values, v.want) {
			p.add(false, "variable %s: label_values(%s, %s) = %v (%v), want it to contain %q",
				v.label, v.match, v.label, values, err, v.want)
		}
	}
	checkRules(p, prom, alertsYAML, names)
}

// metricName matches the metric names of Playhead's selectors in a query.
var metricName = regexp.MustCompile(`\b((?:playhead|go|process)_[a-z_]+|up)\b(\{[^}]*\})?`)

// unknownMetrics names the metrics of expr that Prometheus has never stored (names is every
// metric name it has), as a hint after "no series": usually a renamed metric.
func unknownMetrics(expr string, names []string) string {
	var unknown []string
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		if !slices.Contains(names, name) && !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 || names == nil {
		return ""
	}
	return fmt.Sprintf(" (Prometheus has no metric %s)", strings.Join(unknown, ", "))
}

// checkSeries runs expr and says what is wrong with its answer: an error, no series, only NaN
// values, or a series without a label the panel's legend shows.
func checkSeries(prom *prometheus, expr string, labels []string) (problem string, fatal bool) {
	series, err := prom.query(expr)
	if err != nil {
		var perr *promError
		return err.Error(), errors.As(err, &perr) && perr.Type == "bad_data"
	}
	if len(series) == 0 {
		return "no series", false
	}
	withValue := 0
	for _, s := range series {
		if !math.IsNaN(s.Value) {
			withValue++
		}
		for _, l := range labels {
			if _, ok := s.Metric[l]; !ok {
				return fmt.Sprintf("legend uses {{%s}}, but series %v has no such label", l, s.Metric), true
			}
		}
	}
	if withValue == 0 {
		return fmt.Sprintf("%d series, all NaN", len(series)), false
	}
	return "", false
}

// checkRules checks the alert rules Prometheus loaded: every one in alerts.yml, the required
// ones among them, each evaluated without error, each with a summary, and each expression of
// the form `signal <comparison> threshold` whose signal returns at least one series. The
// DEAD-jobs alert must be firing: the load made one job DEAD.
func checkRules(p *problems, prom *prometheus, alertsYAML []byte, names []string) {
	rules, err := prom.rules()
	if err != nil {
		p.add(false, "rules API: %v", err)
		return
	}
	if want := len(regexp.MustCompile(`(?m)^\s*-\s*alert:`).FindAll(alertsYAML, -1)); len(rules) != want {
		p.add(true, "Prometheus loaded %d alerting rules, alerts.yml has %d", len(rules), want)
	}
	byName := map[string]promRule{}
	for _, r := range rules {
		byName[r.Name] = r
		if r.Health != "ok" {
			p.add(r.Health == "err", "alert %s: health %q %s", r.Name, r.Health, r.LastError)
		}
		if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
			p.add(true, "alert %s: needs a severity label and a summary annotation", r.Name)
		}
		signal, ok := alertSignal(r.Query)
		if !ok {
			p.add(true, "alert %s: expression %q is not `signal <comparison> threshold`", r.Name, r.Query)
			continue
		}
		if msg, fatal := checkSeries(prom, signal, nil); msg != "" {
			p.add(fatal, "alert %s: signal %s%s\n      query: %s", r.Name, msg, unknownMetrics(signal, names), signal)
		}
	}
	for _, name := range requiredAlerts {
		if _, ok := byName[name]; !ok {
			p.add(true, "alert %s is missing from alerts.yml", name)
		}
	}
	if r, ok := byName["PlayheadDeadJobsIncreasing"]; ok && r.State != "firing" {
		p.add(false, "alert PlayheadDeadJobsIncreasing is %q after a job went DEAD, want firing", r.State)
	}
}

// alertSignal splits an alert expression at its last top-level comparison and returns the
// left side: the figure the alert watches, which exists whether or not the alert fires.
func alertSignal(expr string) (string, bool) {
	depth, quote := 0, rune(0)
	cut := -1
	rs := []rune(expr)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == '\\' {
				i++
			} else if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '{' || r == '[':
			depth++
		case r == ')' || r == '}' || r == ']':
			depth--
		case depth == 0 && (r == '>' || r == '<'):
			cut = i
		case depth == 0 && (r == '=' || r == '!') && i+1 < len(rs) && rs[i+1] == '=':
			cut = i
			i++
		}
	}
	if cut <= 0 {
		return "", false
	}
	return strings.TrimSpace(string(rs[:cut])), true
}

// checkMetricsDoc compares the binary's /metrics with the metric tables of docs/metrics.md:
// every exposed metric must have a row with its type and labels, and every documented
// playhead_* metric must be exposed (the load has made every labelled family appear).
func checkMetricsDoc(t *testing.T, metricsAddr, docPath string) {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	type family struct {
		typ    string
		labels []string
	}
	documented := map[string]family{}
	row := regexp.MustCompile("(?m)^\\| `([a-z_:]+)` \\| (counter|gauge|histogram|summary|untyped) \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var labels []string
		for _, l := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		documented[m[1]] = family{typ: m[2], labels: labels}
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d (%v)", resp.StatusCode, err)
	}
	exposed := map[string]family{}
	typeLine := regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	for _, m := range typeLine.FindAllStringSubmatch(string(body), -1) {
		exposed[m[1]] = family{typ: m[2]}
	}
	sample := regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)
	labelName := regexp.MustCompile(`(\w+)="`)
	for _, m := range sample.FindAllStringSubmatch(string(body), -1) {
		name := m[1]
		if _, ok := exposed[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suffix); base != name {
					name = base
					break
				}
			}
		}
		f, ok := exposed[name]
		if !ok {
			continue
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" && !slices.Contains(f.labels, l[1]) {
				f.labels = append(f.labels, l[1])
			}
		}
		slices.Sort(f.labels)
		exposed[name] = f
	}

	for name, f := range exposed {
		d, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md does not document %s (%s, labels %v)", name, f.typ, f.labels)
		case d.typ != f.typ || !slices.Equal(d.labels, f.labels):
			t.Errorf("docs/metrics.md says %s is a %s with labels %v; /metrics has a %s with labels %v", name, d.typ, d.labels, f.typ, f.labels)
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok && strings.HasPrefix(name, "playhead_") {
			t.Errorf("docs/metrics.md documents %s, which /metrics does not expose", name)
		}
	}
}

// ---------------------------------------------------------------------------------------
// The dashboard model

type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *dashDatasource `json:"datasource"`
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashPanel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Datasource  *dashDatasource `json:"datasource"`
	Targets     []dashTarget    `json:"targets"`
	Panels      []dashPanel     `json:"panels"` // a collapsed row's panels
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

type dashTarget struct {
	RefID      string          `json:"refId"`
	Expr       string          `json:"expr"`
	Legend     string          `json:"legendFormat"`
	Datasource *dashDatasource `json:"datasource"`
	Panel      string          `json:"-"`
}

func loadDashboard(t *testing.T, path string) dashboard {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not a dashboard JSON model: %v", path, err)
	}
	return d
}

// checkDashboardModel checks what does not need Prometheus (variables, rows, data sources,
// units, every selector filtered by job and instance) and returns every panel target.
func checkDashboardModel(t *testing.T, d dashboard) []dashTarget {
	t.Helper()
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("dashboard: uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion >= 36", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]dashVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || variableQuery(v) != "prometheus" {
		t.Errorf("dashboard: want a variable datasource of type datasource for prometheus, have %+v", v)
	}
	for _, name := range []string{"job", "instance"} {
		v := vars[name]
		if v.Type != "query" || !strings.HasPrefix(variableQuery(v), "label_values(") {
			t.Errorf("dashboard: want a query variable %s with label_values(…), have %+v", name, v)
		}
	}

	var targets []dashTarget
	rows := map[string]bool{}
	ids := map[int]string{}
	var walk func(ps []dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("dashboard: panel %q has id %d (also %q); ids must be unique and non-zero", p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				rows[p.Title] = true
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("dashboard: panel %q has no targets", p.Title)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("dashboard: panel %q must use the ${datasource} variable, has %+v", p.Title, p.Datasource)
			}
			if p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("dashboard: panel %q has no unit", p.Title)
			}
			for _, tg := range p.Targets {
				tg.Panel = p.Title
				if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
					t.Errorf("dashboard: panel %q has a target without expr or refId", p.Title)
				}
				for _, m := range metricName.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.Contains(m[2], `job=~"$job"`) || !strings.Contains(m[2], `instance=~"$instance"`) {
						t.Errorf("dashboard: panel %q target %s: selector %s%s is not filtered by $job and $instance",
							p.Title, tg.RefID, m[1], m[2])
					}
				}
				targets = append(targets, tg)
			}
		}
	}
	walk(d.Panels)
	for _, r := range requiredRows {
		if !rows[r] {
			t.Errorf("dashboard: no row %q", r)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return targets
}

// variableQuery returns a query variable's query, which Grafana stores either as a string or
// as an object with a query field.
func variableQuery(v dashVariable) string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)`)

// substitute replaces Grafana's variables in expr with vars, as Grafana would before sending
// the query; an unknown variable is an error.
func substitute(expr string, vars map[string]string) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, m)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variables %v", unknown)
	}
	return out, nil
}

// legendLabels returns the labels a legend format shows ({{route}} → route).
func legendLabels(format string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`).FindAllStringSubmatch(format, -1) {
		out = append(out, m[1])
	}
	return out
}

// ---------------------------------------------------------------------------------------
// Prometheus

type prometheus struct {
	url    string
	client *http.Client
}

type promSeries struct {
	Metric map[string]string
	Value  float64
}

type promError struct{ Type, Msg string }

func (e *promError) Error() string { return e.Type + ": " + e.Msg }

type promRule struct {
	Name        string            `json:"name"`
	Query       string            `json:"query"`
	Health      string            `json:"health"`
	LastError   string            `json:"lastError"`
	State       string            `json:"state"`
	Type        string            `json:"type"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// get calls a Prometheus API endpoint and decodes its data.
func (p *prometheus) get(path string, params url.Values, data any) error {
	resp, err := p.client.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: status %d, undecodable answer: %v", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return &promError{Type: body.ErrorType, Msg: body.Error}
	}
	return json.Unmarshal(body.Data, data)
}

// query evaluates expr at the current time and returns its series (a scalar is one series).
func (p *prometheus) query(expr string) ([]promSeries, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var raw []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &raw); err != nil {
			return nil, err
		}
		out := make([]promSeries, 0, len(raw))
		for _, r := range raw {
			out = append(out, promSeries{Metric: r.Metric, Value: sampleValue(r.Value)})
		}
		return out, nil
	case "scalar":
		var raw [2]any
		if err := json.Unmarshal(data.Result, &raw); err != nil {
			return nil, err
		}
		return []promSeries{{Metric: map[string]string{}, Value: sampleValue(raw)}}, nil
	default:
		return nil, fmt.Errorf("result type %s, want an instant vector", data.ResultType)
	}
}

func sampleValue(v [2]any) float64 {
	s, _ := v[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// labelValues answers Grafana's label_values(match, label).
func (p *prometheus) labelValues(label, match string) ([]string, error) {
	var values []string
	params := url.Values{}
	if match != "" {
		params.Set("match[]", match)
	}
	err := p.get("/api/v1/label/"+label+"/values", params, &values)
	return values, err
}

// rules returns the alerting rules Prometheus loaded.
func (p *prometheus) rules() ([]promRule, error) {
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// startPrometheus runs prometheus on loopback with prometheus.yml rewritten to scrape target
// every second, and alerts.yml evaluated every second, and waits until it is ready.
func startPrometheus(t *testing.T, bin, promtool, target string) *prometheus {
	t.Helper()
	raw, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(raw)
	for _, r := range [][2]string{
		{committedTarget, target},
		{committedScrape, "scrape_interval: 1s"},
		{committedEval, "evaluation_interval: 1s"},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("prometheus.yml no longer contains %q, which the check replaces with %q; update the check with it", r[0], r[1])
		}
		cfg = strings.ReplaceAll(cfg, r[0], r[1])
	}
	dir := t.TempDir()
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, promtool, "check", "config", configPath)

	addr := freeAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Dir = dir
	startProcess(t, "prometheus", cmd)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	p := &prometheus{url: "http://" + addr, client: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
	waitFor(t, readyTimeout, "Prometheus /-/ready", func() error { return httpOK(p.client, p.url+"/-/ready") })
	return p
}

// ---------------------------------------------------------------------------------------
// Playhead and its load

type playhead struct {
	httpURL, metricsAddr string
	client               *http.Client
}

func startPlayhead(t *testing.T) *playhead {
	t.Helper()
	dbURL := pgtest.URL(t)
	storageDir, scratch, workDir := t.TempDir(), t.TempDir(), t.TempDir()
	httpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(binary, "serve")
	cmd.Dir = workDir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + scratch,
		"DATABASE_URL=" + dbURL,
		"PLAYHEAD_JWT_SECRET=" + testSecret,
		"PLAYHEAD_HTTP_ADDR=" + httpAddr,
		"PLAYHEAD_METRICS_ADDR=" + metricsAddr,
		"PLAYHEAD_NODE_ID=grafana-check",
		"PLAYHEAD_STORAGE_DIR=" + storageDir,
		"PLAYHEAD_ENCODE_PRESET=ultrafast",
		"PLAYHEAD_FLUSH_INTERVAL=250ms",
		"PLAYHEAD_JOB_POLL_INTERVAL=200ms",
		"PLAYHEAD_SHUTDOWN_TIMEOUT=10s",
		"PLAYHEAD_PUT_RATE=1",
		"PLAYHEAD_PUT_BURST=" + strconv.Itoa(putBurst),
		"PLAYHEAD_INGEST_ALLOW_PRIVATE=true", // the import's video host is on loopback
		// The GC pause panel needs GC cycles while Prometheus watches; with a small GOGC the
		// little load of the check makes several.
		"GOGC=20",
	}
	startProcess(t, "playhead", cmd)
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(transport.CloseIdleConnections)
	ph := &playhead{httpURL: "http://" + httpAddr, metricsAddr: metricsAddr,
		client: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
	waitFor(t, readyTimeout, "playhead /readyz", func() error { return httpOK(ph.client, "http://"+metricsAddr+"/readyz") })
	return ph
}

// videoHost serves video at /direct/clip.mp4 on loopback, for imports; other paths are 404.
func videoHost(t *testing.T, video []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/direct/clip.mp4" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = w.Write(video)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// do sends a request with an optional bearer token and body and returns the status and body.
func (ph *playhead) do(method, path, token, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequest(method, ph.httpURL+path, body)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := ph.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// jsonDo is do with an optional JSON body.
func (ph *playhead) jsonDo(method, path, token string, body any) (int, []byte, error) {
	var rd io.Reader
	contentType := ""
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd, contentType = bytes.NewReader(raw), "application/json"
	}
	return ph.do(method, path, token, contentType, rd)
}

// mustDo is jsonDo that fails the test unless the answer has status want.
func (ph *playhead) mustDo(t *testing.T, want int, method, path, token string, body any) []byte {
	t.Helper()
	status, out, err := ph.jsonDo(method, path, token, body)
	if err != nil || status != want {
		t.Fatalf("%s %s: status %d (%v), want %d; body %s", method, path, status, err, want, out)
	}
	return out
}

// upload posts content as the multipart file of a new media item and returns its id.
func (ph *playhead) upload(t *testing.T, token, name string, content []byte) int64 {
	t.Helper()
	return idOf(t, ph.postFile(t, "/v1/media", token, name, content))
}

// importSheet posts a CSV sheet to the admin import endpoint.
func (ph *playhead) importSheet(t *testing.T, token, csv string) {
	t.Helper()
	ph.postFile(t, "/v1/admin/imports", token, "sheet.csv", []byte(csv))
}

// postFile posts content as the multipart field "file" and expects 202.
func (ph *playhead) postFile(t *testing.T, path, token, name string, content []byte) []byte {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	status, out, err := ph.do(http.MethodPost, path, token, mw.FormDataContentType(), &body)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("POST %s %s: status %d (%v), want 202; body %s", path, name, status, err, out)
	}
	return out
}

func idOf(t *testing.T, out []byte) int64 {
	t.Helper()
	var v struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.ID <= 0 {
		t.Fatalf("answer %s has no positive id (%v)", out, err)
	}
	return v.ID
}

func mint(t *testing.T, member int64, admin bool) string {
	t.Helper()
	tok, err := auth.Mint([]byte(testSecret), member, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// load drives playhead: setup makes the series every panel needs, then a background loop
// keeps a trickle of playback traffic going so rates are not zero, until stop.
type load struct {
	ph      *playhead
	members []string // tokens
	media   []int64
	// uploader and video make encode jobs.
	uploader string
	video    []byte
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	errs     []string
}

func startLoad(ph *playhead) *load {
	return &load{ph: ph, done: make(chan struct{})}
}

const (
	// Members stay within the default per-member limit on position reports (1/s, burst 10):
	// loadReports in the burst, and one report every loadMembers × trickleEvery afterwards.
	loadMembers   = 60
	loadMedia     = 3
	loadReports   = 5
	trickleEvery  = 20 * time.Millisecond
	mediaDuration = 3_600_000
	putBurst      = 10 // PLAYHEAD_PUT_BURST
)

func (l *load) setup(t *testing.T, videoHost string) {
	t.Helper()
	ph := l.ph
	admin := mint(t, 1, true)
	for i := range loadMedia {
		out := ph.mustDo(t, http.StatusCreated, http.MethodPost, "/v1/admin/media", admin,
			map[string]any{"title": fmt.Sprintf("grafana check %d", i), "duration_ms": mediaDuration})
		l.media = append(l.media, idOf(t, out))
	}
	for i := range loadMembers {
		l.members = append(l.members, mint(t, int64(100+i), false))
	}

	// The media pipeline: an upload that encodes, one that is not a video (DEAD at once), and
	// an import of two rows: a video that downloads and encodes, and a link that answers 404.
	l.uploader = mint(t, 50, false)
	l.uploadVideo(t)
	ph.upload(t, l.uploader, "notes.txt", []byte(strings.Repeat("meeting notes, not a video\n", 40)))
	ph.importSheet(t, admin, "collection,chapter,order,video_url\n"+
		"grafana check,1,1,"+videoHost+"/direct/clip.mp4\n"+
		"grafana check,1,2,"+videoHost+"/direct/gone.mp4\n")

	// A burst of playback from every member: open, report positions, read back, list.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, tok := range l.members {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			path := func(k int) string { return fmt.Sprintf("/v1/playback/%d", l.media[(i+k)%len(l.media)]) }
			l.expect(http.StatusOK, http.MethodPost, path(0), tok, nil)
			for k := range loadReports {
				l.expect(http.StatusNoContent, http.MethodPut, path(k), tok, map[string]any{"position_ms": (k + 1) * 1000})
			}
			l.expect(http.StatusOK, http.MethodGet, path(0), tok, nil)
			l.expect(http.StatusOK, http.MethodGet, "/v1/playback?limit=10", tok, nil)
		})
	}
	wg.Wait()
	// Client errors, so the error panels have their series: unknown media, a position beyond
	// the media's end, no token, an unknown path, and a member reporting faster than its
	// limit allows (429).
	tok := mint(t, 99, false)
	path := fmt.Sprintf("/v1/playback/%d", l.media[0])
	l.expect(http.StatusNotFound, http.MethodPut, "/v1/playback/999999999", tok, map[string]any{"position_ms": 1000})
	l.expect(http.StatusUnprocessableEntity, http.MethodPut, path, tok, map[string]any{"position_ms": mediaDuration + 1})
	l.expect(http.StatusUnauthorized, http.MethodGet, "/v1/playback", "", nil)
	l.expect(http.StatusNotFound, http.MethodGet, "/no/such/path", "", nil)
	limited := 0
	for k := range 2 * putBurst {
		status, _, err := ph.jsonDo(http.MethodPut, path, tok, map[string]any{"position_ms": (k + 1) * 1000})
		if err == nil && status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		l.record("%d PUTs in a row from one member were never answered 429 (PLAYHEAD_PUT_BURST=%d)", 2*putBurst, putBurst)
	}
	if errs := l.errors(); len(errs) > 0 {
		t.Fatalf("the setup load got unexpected answers:\n  %s", strings.Join(errs, "\n  "))
	}

	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.trickle(ctx)
	t.Cleanup(func() { l.stop(t) })
}

// uploadVideo uploads the test video: one more encode job.
func (l *load) uploadVideo(t *testing.T) {
	t.Helper()
	l.ph.upload(t, l.uploader, "clip.mp4", l.video)
}

// trickle reports a position every trickleEvery, rotating over members and media, with a
// read every tenth time, until ctx is done.
func (l *load) trickle(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(trickleEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tok := l.members[n%len(l.members)]
		path := fmt.Sprintf("/v1/playback/%d", l.media[(n/len(l.members))%len(l.media)])
		l.expect(http.StatusNoContent, http.MethodPut, path, tok, map[string]any{"position_ms": (loadReports + 1 + n) * 1000 % mediaDuration})
		if n%10 == 0 {
			l.expect(http.StatusOK, http.MethodGet, path, tok, nil)
		}
	}
}

// expect sends a request with a JSON body and records an answer other than want.
func (l *load) expect(want int, method, path, token string, body any) {
	status, out, err := l.ph.jsonDo(method, path, token, body)
	if err != nil || status != want {
		l.record("%s %s: status %d (%v), want %d; body %s", method, path, status, err, want, out)
	}
}

// record notes something the load did not expect (the first 20).
func (l *load) record(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 20 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
}

func (l *load) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// stop ends the background load (once) and reports what it got wrong.
func (l *load) stop(t *testing.T) {
	t.Helper()
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.cancel = nil
	<-l.done
	if errs := l.errors(); len(errs) > 0 {
		t.Errorf("the load got unexpected answers:\n  %s", strings.Join(errs, "\n  "))
	}
}

// ---------------------------------------------------------------------------------------
// Processes and small helpers

// requireTool finds name on PATH or fails the test saying how to install it; it never skips.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required by the dashboard check and was not found (%v).\n"+
			"Install Prometheus: apt-get install -y prometheus (make deps does it as root)", name, err)
	}
	return path
}

// runTool runs a command that must succeed (promtool checks).
func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// startProcess starts cmd; at cleanup it sends SIGTERM, waits up to stopTimeout, then kills,
// and logs the process's output when the test failed.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	out := &binarytest.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out)
		}
	})
	t.Cleanup(func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			return
		case <-time.After(stopTimeout):
		}
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(stopTimeout):
			t.Errorf("%s pid %d did not exit after SIGKILL", name, cmd.Process.Pid)
		}
	})
}

// waitFor calls f until it returns nil, failing the test with f's last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (last: %v)", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
