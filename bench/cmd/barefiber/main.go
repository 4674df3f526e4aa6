// Command barefiber is the ceiling of the PUT path: a Fiber server that parses the
// media id and the JSON body of PUT /v1/playback/{id} and answers 204, with nothing else — no
// token, no cache, no rate limit, no buffer, no metrics, no database. The side-by-side
// benchmark (bench/putpath) drives it and Playhead with the same load.
//
//	barefiber -addr 127.0.0.1:18080
package main

import (
	"encoding/json"
	"flag"
	"log"
	"strconv"

	"github.com/gofiber/fiber/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address (loopback)")
	flag.Parse()
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Put("/v1/playback/:mediaID", put)
	log.Fatal(app.Listen(*addr))
}

// put does what any handler of this route must: read the id and decode the body. An answer
// other than 204 would make the benchmark's comparison void, so bad input is refused plainly.
func put(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("mediaID"), 10, 64)
	if err != nil || id <= 0 {
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "media id must be a positive integer"})
	}
	var body struct {
		PositionMS int64 `json:"position_ms"`
	}
	if err := json.Unmarshal(c.Body(), &body); err != nil || body.PositionMS < 0 {
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "body must be {\"position_ms\": n} with n >= 0"})
	}
	return c.SendStatus(fiber.StatusNoContent)
}
