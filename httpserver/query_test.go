package httpserver_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/httpserver"
)

func TestQueryID(t *testing.T) {
	app := fiber.New(fiber.Config{ErrorHandler: httpserver.ErrorHandler(slog.New(slog.DiscardHandler))})
	app.Get("/", func(c *fiber.Ctx) error {
		id, err := httpserver.QueryID(c, "before")
		if err != nil {
			return err
		}
		return c.SendString(strings.Repeat("x", int(min(id, 10))))
	})
	for query, want := range map[string]int{"": 200, "?before=7": 200, "?before=0": 400, "?before=-1": 400, "?before=1e3": 400,
		"?before=9223372036854775808": 400, "?before=%00": 400} {
		resp, err := app.Test(httptest.NewRequest("GET", "/"+query, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("GET /%s: %d, want %d", query, resp.StatusCode, want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := httpserver.Excerpt("short"); got != "short" {
		t.Errorf("Excerpt(short) = %q", got)
	}
	long := strings.Repeat("a", 39) + "한국어"
	got := httpserver.Excerpt(long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > 40+len("…") {
		t.Errorf("Excerpt(%q) = %q, want at most 40 valid bytes and …", long, got)
	}
}
