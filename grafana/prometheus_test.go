package grafana_test

// The Prometheus the check runs (from this folder's prometheus.yml and alerts.yml), the small
// client of its HTTP API the check needs, and the tools it calls.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

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

	addr := binarytest.FreeAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Dir = dir
	binarytest.StartProcess(t, cmd)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	p := &prometheus{url: "http://" + addr, client: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
	waitFor(t, readyTimeout, "Prometheus /-/ready", func() error { return httpOK(p.client, p.url+"/-/ready") })
	return p
}

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
