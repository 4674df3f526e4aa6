// Package api holds Playhead's OpenAPI 3.1 document, api/openapi.yaml, the one description of
// every route the public server registers, and serves it at /openapi.yaml. The contract test
// (cmd/api/contract_test.go, internal/contract) checks the server against it.
package api

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/httpserver"
)

// Document is api/openapi.yaml, embedded so that the binary serves the document it was built
// with.
//
//go:embed openapi.yaml
var Document []byte

// Path is where Register serves Document.
const Path = "/openapi.yaml"

// Register serves Document at Path without a token, like the health routes: a client author
// needs it before holding one.
func Register(app fiber.Router) {
	httpserver.Get(app, Path, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, "application/yaml")
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return c.Send(Document)
	})
}
