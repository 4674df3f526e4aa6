package auth_test

import (
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
)

// The middleware takes the token from the Authorization header only (never a cookie); anything
// else is refused before the handler runs (the mutation tool found these branches untested in
// this package: docs/internals/reliability.md).
func TestMiddleware_TokenFromTheHeaderOnly(t *testing.T) {
	v, err := auth.NewVerifier(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	good, err := auth.Mint(secret, 42, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{ErrorHandler: func(c *fiber.Ctx, err error) error {
		if e, ok := errors.AsType[*apperr.Error](err); ok && e.Code == apperr.Unauthenticated {
			return c.SendStatus(fiber.StatusUnauthorized)
		}
		return c.SendStatus(fiber.StatusInternalServerError)
	}})
	member := func(c *fiber.Ctx) error { return c.SendString(strconv.FormatInt(auth.From(c).MemberID, 10)) }
	app.Get("/api", v.Middleware(), member)
	for _, tc := range []struct {
		path, header, cookie string
		want                 int
	}{
		{"/api", "Bearer " + good, "", 200},
		{"/api", "", good, 401}, // a cookie is never read
		{"/api", "", "", 401},
		{"/api", "Bearer ", "", 401},
		{"/api", "Basic " + good, "", 401},
		{"/api", "Bearer " + good + "x", "", 401},
	} {
		req := httptest.NewRequest(fiber.MethodGet, tc.path, nil)
		if tc.header != "" {
			req.Header.Set(fiber.HeaderAuthorization, tc.header)
		}
		if tc.cookie != "" {
			req.Header.Set(fiber.HeaderCookie, "playhead_token="+tc.cookie)
		}
		resp, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (Authorization %q, cookie %q) = %d, want %d", tc.path, tc.header, tc.cookie, resp.StatusCode, tc.want)
		}
	}
}

// A token of a member Refuse names answers 401 even when it was verified (and cached) before,
// while the other members' tokens still pass.
func TestVerifier_RefuseErasedMember(t *testing.T) {
	v, err := auth.NewVerifier(secret, 100)
	if err != nil {
		t.Fatal(err)
	}
	erased := map[int64]bool{}
	v.Refuse(func(m int64) bool { return erased[m] })
	gone, err := auth.Mint(secret, 42, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := auth.Mint(secret, 43, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(gone); err != nil { // verified, and cached
		t.Fatal(err)
	}
	erased[42] = true
	if _, err := v.Verify(gone); apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("Verify(an erased member's cached token) = %v, want unauthenticated", err)
	}
	if id, err := v.Verify(kept); err != nil || id.MemberID != 43 {
		t.Fatalf("Verify(another member's token) = %v, %v", id, err)
	}
}
