package httpserver_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
)

// requestLabels is one series of playhead_http_requests_total.
type requestLabels struct{ method, route, status string }

// TestMetrics_ConcurrentRequestsCountedExactlyByRoutePattern: requests from concurrent
// keep-alive connections, each mixing methods (so fasthttp rewrites the method bytes a kept
// label could point into), ids, unknown paths and statuses, every combination first seen by
// many requests at once, are each counted exactly once under their method, route pattern and
// status, and timed once under their method and route pattern; each combination is resolved
// once. Thousands of distinct raw paths make a handful of series, and a method Fiber does not
// know is refused before the metrics.
func TestMetrics_ConcurrentRequestsCountedExactlyByRoutePattern(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := httpserver.NewMetrics(reg)
	app := httpserver.New(httpserver.Config{Metrics: metrics})
	app.Put("/v1/playback/:mediaID", func(c *fiber.Ctx) error {
		id, err := httpserver.ParamID(c, "mediaID")
		if err != nil {
			return err
		}
		if id%2 == 1 {
			return apperr.Errorf(apperr.Unprocessable, "odd")
		}
		return c.SendStatus(fiber.StatusNoContent)
	})
	app.Get("/v1/playback/:mediaID", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true}) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	base := "http://" + ln.Addr().String()

	type request struct {
		method, path string
		want         requestLabels // the series it must count in; empty method: none
	}
	const workers, perWorker = 8, 300
	requestFor := func(w, i int) request {
		id := w*perWorker + i + 1 // a distinct raw path per request
		switch i % 6 {
		case 0:
			return request{http.MethodPut, fmt.Sprintf("/v1/playback/%d", 2*id), requestLabels{"PUT", "/v1/playback/:mediaID", "204"}}
		case 1:
			return request{http.MethodPut, fmt.Sprintf("/v1/playback/%d", 2*id+1), requestLabels{"PUT", "/v1/playback/:mediaID", "422"}}
		case 2:
			return request{http.MethodPut, fmt.Sprintf("/v1/playback/x%d", id), requestLabels{"PUT", "/v1/playback/:mediaID", "400"}}
		case 3:
			return request{http.MethodGet, fmt.Sprintf("/v1/playback/%d", id), requestLabels{"GET", "/v1/playback/:mediaID", "200"}}
		case 4:
			return request{http.MethodDelete, fmt.Sprintf("/nowhere/%d", id), requestLabels{"DELETE", "unmatched", "404"}}
		default:
			return request{"BREW", fmt.Sprintf("/v1/playback/%d", id), requestLabels{}}
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	t.Cleanup(client.CloseIdleConnections)
	want := map[requestLabels]float64{}
	for w := range workers {
		for i := range perWorker {
			if r := requestFor(w, i); r.want.method != "" {
				want[r.want]++
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				r := requestFor(w, i)
				req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(""))
				if err != nil {
					errs <- err
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					errs <- fmt.Errorf("%s %s: %w", r.method, r.path, err)
					return
				}
				_ = resp.Body.Close()
				if r.want.method != "" && fmt.Sprint(resp.StatusCode) != r.want.status {
					errs <- fmt.Errorf("%s %s answered %d, want %s", r.method, r.path, resp.StatusCode, r.want.status)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every answer has been written, so every request has passed the middleware.
	counted, timed := map[requestLabels]float64{}, map[[2]string]uint64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			switch f.GetName() {
			case "playhead_http_requests_total":
				counted[requestLabels{l["method"], l["route"], l["status"]}] += m.GetCounter().GetValue()
			case "playhead_http_request_duration_seconds":
				timed[[2]string{l["method"], l["route"]}] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if fmt.Sprint(counted) != fmt.Sprint(want) {
		t.Errorf("playhead_http_requests_total = %v\nwant %v", counted, want)
	}
	wantTimed := map[[2]string]uint64{}
	for l, n := range want {
		wantTimed[[2]string{l.method, l.route}] += uint64(n)
	}
	if fmt.Sprint(timed) != fmt.Sprint(wantTimed) {
		t.Errorf("playhead_http_request_duration_seconds sample counts = %v\nwant %v", timed, wantTimed)
	}
	// Each combination is resolved once and found again by every later request (a key that
	// pointed into a request buffer would be rewritten by the next request and never match).
	if got := metrics.Resolved(); got != len(want) {
		t.Errorf("%d label combinations resolved, want the %d the requests had", got, len(want))
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}
