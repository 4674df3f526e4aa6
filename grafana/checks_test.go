package grafana_test

// What the check asks of every panel target, template variable and alert rule once Prometheus
// has data, and of docs/operations/metrics.md.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

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

// checkMetricsDoc compares the binary's /metrics (body) with the metric tables of
// docs/operations/metrics.md (generated from a node's registry by make docs): every exposed
// metric must have a row with its type and labels, and every documented playhead_* metric must
// be exposed (the load has made every labelled family appear).
func checkMetricsDoc(t *testing.T, body, docPath string) {
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

	exposed := map[string]family{}
	typeLine := regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	for _, m := range typeLine.FindAllStringSubmatch(body, -1) {
		exposed[m[1]] = family{typ: m[2]}
	}
	sample := regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)
	labelName := regexp.MustCompile(`(\w+)="`)
	for _, m := range sample.FindAllStringSubmatch(body, -1) {
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
			t.Errorf("docs/operations/metrics.md does not document %s (%s, labels %v)", name, f.typ, f.labels)
		case d.typ != f.typ || !slices.Equal(d.labels, f.labels):
			t.Errorf("docs/operations/metrics.md says %s is a %s with labels %v; /metrics has a %s with labels %v", name, d.typ, d.labels, f.typ, f.labels)
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok && strings.HasPrefix(name, "playhead_") {
			t.Errorf("docs/operations/metrics.md documents %s, which /metrics does not expose", name)
		}
	}
}
