package webhooks

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// TestAdminHandler_EventsNullIsRefused: `events` left out registers every event type; a null
// is refused (400) rather than read as absent, since the document, and every client generated
// from it, has no null there; so is an empty list. A body not declared JSON is 415.
func TestAdminHandler_EventsNullIsRefused(t *testing.T) {
	pool, _, _, _, _ := setup(t)
	secret := []byte("webhooks-test-secret-webhooks-test-secret")
	verifier, err := auth.NewVerifier(secret, 16)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := auth.Mint(secret, 1, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	(&AdminHandler{Store: NewStore(pool), AllowPrivate: true}).Register(app.Group("/v1/admin", verifier.Middleware(), auth.RequireAdmin))
	post := func(contentType, body string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/admin/webhooks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", contentType)
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	status, out := post("application/json", `{"url": "http://127.0.0.1/a"}`)
	var created struct {
		Events []string `json:"events"`
	}
	if err := json.Unmarshal(out, &created); status != fiber.StatusCreated || err != nil || !slices.Equal(created.Events, slices.Sorted(slices.Values(media.EventTypes))) {
		t.Fatalf("events left out: %d %s, want 201 with every event type %v", status, out, media.EventTypes)
	}
	for _, tc := range []struct {
		contentType, body string
		want              int
	}{
		{"application/json", `{"url": "http://127.0.0.1/b", "events": null}`, fiber.StatusBadRequest},
		{"application/json", `{"url": "http://127.0.0.1/b", "events": []}`, fiber.StatusBadRequest},
		{"application/json", `{"url": "http://127.0.0.1/b", "events": "media.ready"}`, fiber.StatusUnprocessableEntity},
		{"text/plain", `{"url": "http://127.0.0.1/b"}`, fiber.StatusUnsupportedMediaType},
	} {
		status, out := post(tc.contentType, tc.body)
		var e struct {
			Error string `json:"error"`
		}
		if status != tc.want || json.Unmarshal(out, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: %d %s, want %d with a JSON error", tc.contentType, tc.body, status, out, tc.want)
		}
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_endpoints`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d endpoints (%v), want setup's two and the one registered here", n, err)
	}
}
