package grafana_test

// The dashboard's JSON model and what is checked of it without Prometheus.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

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
