package main

// The reference tables of the docs, generated from the code: the settings
// (docs/operations/configuration.md, from settingGroups), the metrics of a fully wired node
// (docs/operations/metrics.md), the operations of api/openapi.yaml (docs/api/routes.md) and the
// job kinds (docs/internals/job-queue.md, from jobKinds). Each table sits between two markers
//
//	<!-- BEGIN GENERATED: <section> (make docs) -->
//	<!-- END GENERATED: <section> -->
//
// and everything around them is written by hand. Each TestDocs_ test fails, naming make docs,
// when its section differs from what the code generates; make docs runs them with -update,
// which writes the sections instead. The generator is these tests rather than a command of the
// binary because the metric table needs a node built against a real PostgreSQL, which the
// tests start (internal/pgtest), and the binary has no business migrating a database to write
// docs.

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
)

var updateDocs = flag.Bool("update", false, "write the generated sections of the docs instead of checking them (make docs)")

// TestDocs_Settings: the settings' tables of docs/operations/configuration.md are
// `playhead config --markdown`.
func TestDocs_Settings(t *testing.T) {
	var b strings.Builder
	if err := runConfig([]string{"--markdown"}, &b); err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "docs/operations/configuration.md", "settings", b.String())
}

// TestDocs_Metrics: the metric tables of docs/operations/metrics.md are the families of an
// `all` node, which has every component of both other roles, as build wires it.
func TestDocs_Metrics(t *testing.T) {
	var playhead, runtime []*dto.MetricFamily
	for _, f := range nodeMetricFamilies(t) {
		if strings.HasPrefix(f.GetName(), "playhead_") {
			playhead = append(playhead, f)
		} else {
			runtime = append(runtime, f)
		}
	}
	checkGenerated(t, "docs/operations/metrics.md", "metrics", metricsTable(playhead))
	checkGenerated(t, "docs/operations/metrics.md", "runtime metrics", metricsTable(runtime))
}

// TestDocs_Routes: docs/api/routes.md lists every operation of api/openapi.yaml.
func TestDocs_Routes(t *testing.T) {
	index, err := routeIndex(api.Document)
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "docs/api/routes.md", "routes", index)
}

// TestDocs_JobKinds: docs/internals/job-queue.md lists every kind of jobKinds.
func TestDocs_JobKinds(t *testing.T) {
	checkGenerated(t, "docs/internals/job-queue.md", "job kinds", jobKindsTable(docsConfig(t, nil)))
}

// checkGenerated compares the section of the file at path (from the repository's root) between
// its markers with content, or with -update writes content there.
func checkGenerated(t *testing.T, path, section, content string) {
	t.Helper()
	file := filepath.Join(repoRoot, path)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin := "<!-- BEGIN GENERATED: " + section + " (make docs) -->\n"
	end := "<!-- END GENERATED: " + section + " -->"
	text := string(raw)
	from := strings.Index(text, begin)
	to := strings.Index(text, end)
	if from < 0 || to < from {
		t.Fatalf("%s has no section %q: want the lines\n%s%s", path, section, begin, end)
	}
	from += len(begin)
	have, want := text[from:to], "\n"+content+"\n"
	if have == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(file, []byte(text[:from]+want+text[to:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: section %q written", path, section)
		return
	}
	haveLines, wantLines := strings.Split(have, "\n"), strings.Split(want, "\n")
	line := 0
	for line < len(haveLines) && line < len(wantLines) && haveLines[line] == wantLines[line] {
		line++
	}
	at := func(lines []string) string {
		if line < len(lines) {
			return strconv.Quote(lines[line])
		}
		return "(the end)"
	}
	t.Errorf("%s: the section %q is not what the code generates: run make docs.\n"+
		"First difference, line %d of the section:\n  file: %s\n  code: %s",
		path, section, line+1, at(haveLines), at(wantLines))
}

// docsConfig is the configuration with every default, whatever the environment of the test:
// DATABASE_URL and the JWT secret (required), then vars on top.
func docsConfig(t *testing.T, vars map[string]string) Config {
	t.Helper()
	all := map[string]string{"DATABASE_URL": "postgres://playhead@127.0.0.1:5432/playhead", "PLAYHEAD_JWT_SECRET": binarytest.Secret}
	maps.Copy(all, vars)
	e := env{lookup: func(name string) (string, bool) { v, ok := all[name]; return v, ok }}
	cfg, err := e.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nodeMetricFamilies builds an `all` node with the default configuration on a database of its
// own, as `playhead serve` does (nothing is started), and returns every metric family
// registered, those that have no series yet included.
func nodeMetricFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	cfg := docsConfig(t, map[string]string{
		"DATABASE_URL":          pgtest.URL(t),
		"PLAYHEAD_HTTP_ADDR":    "127.0.0.1:0",
		"PLAYHEAD_METRICS_ADDR": "127.0.0.1:0",
		"PLAYHEAD_STORAGE_DIR":  t.TempDir(),
		"PLAYHEAD_SPILL_DIR":    t.TempDir(),
		// An identity provider, so its key set's gauges are listed too (never started here:
		// the file is not read).
		"PLAYHEAD_OIDC_ISSUER":   "https://id.example.com/",
		"PLAYHEAD_OIDC_AUDIENCE": "playhead",
		"PLAYHEAD_JWKS_FILE":     "jwks.json",
	})
	reg := &recordingRegistry{Registry: prometheus.NewRegistry()}
	n, err := buildWithRegistry(context.Background(), cfg, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.closeAll()
	reg.giveEveryVectorASeries()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// recordingRegistry is a registry that keeps what is registered with it: a labelled family
// (a vector) has no series before its first use, and a registry gathers only series.
type recordingRegistry struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegistry) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recordingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// giveEveryVectorASeries adds a series with empty label values to every vector registered,
// so that Gather describes each family, its labels included. How many labels a vector has is
// not exported: the first count it accepts is it.
func (r *recordingRegistry) giveEveryVectorASeries() {
	for _, c := range r.collectors {
		var vec *prometheus.MetricVec
		switch v := c.(type) {
		case *prometheus.CounterVec:
			vec = v.MetricVec
		case *prometheus.GaugeVec:
			vec = v.MetricVec
		case *prometheus.HistogramVec:
			vec = v.MetricVec
		case *prometheus.SummaryVec:
			vec = v.MetricVec
		default:
			continue
		}
		for labels := 0; labels <= 16; labels++ {
			if _, err := vec.GetMetricWithLabelValues(make([]string, labels)...); err == nil {
				break
			}
		}
	}
}

// metricsTable is the table of families: name, type, labels (a summary's quantile among them,
// as /metrics shows it; a histogram's le is implied) and help, with a histogram's buckets.
func metricsTable(families []*dto.MetricFamily) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n| --- | --- | --- | --- |\n")
	for _, f := range families {
		var labels []string
		help := f.GetHelp()
		if len(f.GetMetric()) > 0 {
			m := f.GetMetric()[0]
			for _, l := range m.GetLabel() {
				labels = append(labels, "`"+l.GetName()+"`")
			}
			if buckets := m.GetHistogram().GetBucket(); len(buckets) > 0 {
				help += fmt.Sprintf(" (%d buckets, %s … %s)", len(buckets),
					strconv.FormatFloat(buckets[0].GetUpperBound(), 'f', -1, 64),
					strconv.FormatFloat(buckets[len(buckets)-1].GetUpperBound(), 'f', -1, 64))
			}
		}
		if f.GetType() == dto.MetricType_SUMMARY {
			labels = append(labels, "`quantile`")
		}
		labelText := "—"
		if len(labels) > 0 {
			labelText = strings.Join(labels, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()), labelText, markdownCell(help))
	}
	return b.String()
}

// openAPI is what the route index reads of api/openapi.yaml. Paths and webhooks stay nodes, to
// keep the document's order.
type openAPI struct {
	Security []map[string][]string `yaml:"security"`
	Tags     []struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	} `yaml:"tags"`
	Paths    yaml.Node `yaml:"paths"`
	Webhooks yaml.Node `yaml:"webhooks"`
}

// openAPIOperation is one operation of a path or a webhook.
type openAPIOperation struct {
	method, path string
	Tags         []string `yaml:"tags"`
	Summary      string   `yaml:"summary"`
	// Security is nil where the operation does not say, and the document's applies.
	Security   *[]map[string][]string `yaml:"security"`
	Parameters []struct {
		Name     string `yaml:"name"`
		In       string `yaml:"in"`
		Required bool   `yaml:"required"`
	} `yaml:"parameters"`
}

// operations are the operations of a paths or webhooks node, in the document's order.
func operations(items yaml.Node) ([]openAPIOperation, error) {
	methods := []string{"get", "head", "post", "put", "patch", "delete", "options", "trace"}
	var ops []openAPIOperation
	for i := 0; i+1 < len(items.Content); i += 2 {
		path, item := items.Content[i].Value, items.Content[i+1]
		for j := 0; j+1 < len(item.Content); j += 2 {
			method := item.Content[j].Value
			if !slices.Contains(methods, method) {
				continue // the path's own parameters, summary, …
			}
			op := openAPIOperation{method: strings.ToUpper(method), path: path}
			if err := item.Content[j+1].Decode(&op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// caller says who may call op: public (no token), signed link (no token, a signature in the
// URL's sig parameter), member (the document's bearer token) or admin (a token with role
// admin: the operations tagged admin).
func (op openAPIOperation) caller(docSecurity []map[string][]string) string {
	security := docSecurity
	if op.Security != nil {
		security = *op.Security
	}
	if len(security) == 0 {
		for _, p := range op.Parameters {
			if p.Name == "sig" && p.In == "query" && p.Required {
				return "signed link"
			}
		}
		return "public"
	}
	if slices.Contains(op.Tags, "admin") {
		return "admin"
	}
	return "member"
}

// routeIndex is the operations of the OpenAPI document doc, a table per tag (an operation
// under its first tag), then the webhooks Playhead sends.
func routeIndex(doc []byte) (string, error) {
	var d openAPI
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return "", err
	}
	paths, err := operations(d.Paths)
	if err != nil {
		return "", err
	}
	hooks, err := operations(d.Webhooks)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	listed := 0
	for _, tag := range d.Tags {
		var rows []string
		for _, op := range paths {
			if len(op.Tags) > 0 && op.Tags[0] == tag.Name {
				rows = append(rows, fmt.Sprintf("| `%s` | `%s` | %s | %s |\n", op.method, op.path, markdownCell(op.Summary), op.caller(d.Security)))
			}
		}
		if len(rows) == 0 {
			continue
		}
		listed += len(rows)
		fmt.Fprintf(&b, "### %s\n\n%s\n\n| method | path | summary | who may call |\n| --- | --- | --- | --- |\n%s\n",
			tag.Name, tag.Description, strings.Join(rows, ""))
	}
	if listed != len(paths) {
		return "", fmt.Errorf("%d of the %d operations have no first tag among the document's tags", len(paths)-listed, len(paths))
	}
	b.WriteString("### Webhooks Playhead sends\n\nPlayhead calls these on the endpoints registered for them, signed (Standard Webhooks).\n\n" +
		"| method | event | summary |\n| --- | --- | --- |\n")
	for _, op := range hooks {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", op.method, op.path, markdownCell(op.Summary))
	}
	return b.String(), nil
}

// jobKindsTable is the table of jobKinds, their figures as cfg (the defaults) makes them.
func jobKindsTable(cfg Config) string {
	var b strings.Builder
	b.WriteString("| kind | what a job does | at once per node | at once in the cluster | attempts | run limit | retry backoff cap | schedule |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range jobKinds {
		hooks := k.hooks(cfg)
		concurrency := settingCell(k.settings.concurrency, strconv.Itoa(k.concurrency(cfg)))
		attempts, schedule := "—", "—"
		if p := hooks.Periodic; p != nil {
			attempts = strconv.Itoa(cmp.Or(p.MaxAttempts, 3)) // 3: jobqueue.Periodic's default
			schedule = "every " + settingCell(k.settings.schedule, p.Schedule.String())
		}
		attempts = settingCell(k.settings.attempts, attempts)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", k.name, markdownCell(k.doc), concurrency,
			settingCell(k.settings.maxRunning, "—"), attempts, settingCell(k.settings.timeout, "—"),
			settingCell(k.settings.retryCap, durationText(k.retryCap(cfg))), schedule)
	}
	return b.String()
}

// settingCell is the setting name with its default, or fixed when there is none.
func settingCell(name, fixed string) string {
	if name == "" {
		return fixed
	}
	return "`" + name + "` (" + strings.ReplaceAll(settingIndex[name].defaultText(), "`", "") + ")"
}
