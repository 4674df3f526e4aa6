package httpserver_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/playhead/playhead/httpserver"
)

// TestService_StopPastTheDeadlineWithNothingInFlight: a server with no request in flight stops
// cleanly even when the stop's deadline has already passed (the metrics server is stopped last,
// after the buffer may have used the whole budget). Before, Stop chose at random between
// "serving ended" and "deadline passed" and failed about half the stops.
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
