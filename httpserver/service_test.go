package httpserver_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/httpserver"
)

// TestService_StopPastTheDeadlineWithNothingInFlight: a server with no request in flight stops
// cleanly even when the stop's deadline has already passed (the metrics server is stopped last,
// after the buffer may have used the whole budget). A Stop that chose at random between
// "serving ended" and "deadline passed" would fail about half the stops.
func TestService_StopPastTheDeadlineWithNothingInFlight(t *testing.T) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := httpserver.NewHTTPService("test", &http.Server{Handler: http.NotFoundHandler()}, ln)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Stop(expired); err != nil {
			t.Fatalf("stop %d with nothing in flight and the deadline passed: %v, want nil", i, err)
		}
	}
}

// A request still running halfway through the stop's budget is cancelled (its context is the
// one BoundRequests cancels), so the stop ends within its budget; without the cancel the
// request would hold the server until the deadline and the stop would fail.
func TestBoundRequests_CancelsAHungRequestHalfwayThroughTheStop(t *testing.T) {
	requests, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	app := fiber.New()
	app.Get("/hang", func(c *fiber.Ctx) error {
		close(started)
		<-requests.Done() // a database call that does not answer until cancelled
		return c.SendStatus(http.StatusServiceUnavailable)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httpserver.BoundRequests{Service: httpserver.NewAppService("test", app, ln), Cancel: cancel}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/hang")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-started
	stop, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	if err := s.Stop(stop); err != nil {
		t.Fatalf("Stop: %v, want nil (the hung request cancelled halfway)", err)
	}
	if code := <-answered; code != http.StatusServiceUnavailable {
		t.Errorf("the hung request was answered %d, want 503 once cancelled", code)
	}
}
