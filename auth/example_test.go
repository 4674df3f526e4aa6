package auth_test

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// A token minted for a member, verified; and the tokens a Verifier refuses. Every refusal is
// an apperr.Unauthenticated error, which the HTTP layer answers with 401.
func ExampleMint() {
	// The secret is shared by whoever mints tokens and every node that verifies them
	// (PLAYHEAD_JWT_SECRET): at least auth.MinSecretBytes.
	secret := []byte("an example secret of 32 bytes...")
	v, err := auth.NewVerifier(secret, 1000) // remembers up to about 1000 verified tokens
	if err != nil {
		log.Fatal(err)
	}

	token, err := auth.Mint(secret, 42, false, time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	id, err := v.Verify(token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("member %d, admin %t, expires in %s\n", id.MemberID, id.Admin, time.Until(id.Expires).Round(time.Minute))

	admin, _ := auth.Mint(secret, 1, true, time.Hour)
	id, _ = v.Verify(admin)
	fmt.Printf("member %d, admin %t\n", id.MemberID, id.Admin)

	other, _ := auth.Mint([]byte("another secret, also of 32 bytes"), 42, false, time.Hour)
	_, err = v.Verify(other)
	fmt.Println("signed with another secret:", err)

	expired, _ := auth.Mint(secret, 42, false, -time.Minute)
	_, err = v.Verify(expired)
	fmt.Println("expired:", err)
	// Output:
	// member 42, admin false, expires in 1h0m0s
	// member 1, admin true
	// signed with another secret: unauthenticated: token signature is invalid
	// expired: unauthenticated: token expired
}

// The Verifier's middleware in front of a route: it takes the bearer token from the
// Authorization header (never a cookie), and the handler reads who it speaks for with
// auth.From. RequireAdmin after it opens a route to admin tokens only. httpserver's app answers
// the refusals with 401 and 403 and a JSON error.
func ExampleVerifier_Middleware() {
	secret := []byte("an example secret of 32 bytes...")
	v, err := auth.NewVerifier(secret, 1000)
	if err != nil {
		log.Fatal(err)
	}
	app := httpserver.New(httpserver.Config{})
	me := func(c *fiber.Ctx) error { return c.SendString(fmt.Sprint("member ", auth.From(c).MemberID)) }
	app.Get("/me", v.Middleware(), me)
	app.Get("/admin/me", v.Middleware(), auth.RequireAdmin, me)

	member, _ := auth.Mint(secret, 42, false, time.Hour)
	admin, _ := auth.Mint(secret, 1, true, time.Hour)
	for _, call := range []struct{ path, token string }{
		{"/me", member},
		{"/me", ""},
		{"/admin/me", member},
		{"/admin/me", admin},
	} {
		req := httptest.NewRequest(fiber.MethodGet, call.path, nil)
		if call.token != "" {
			req.Header.Set(fiber.HeaderAuthorization, "Bearer "+call.token)
		}
		resp, err := app.Test(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(call.path, resp.StatusCode, string(body))
	}
	// Output:
	// /me 200 member 42
	// /me 401 {"error":"missing bearer token"}
	// /admin/me 403 {"error":"admin role required"}
	// /admin/me 200 member 1
}
