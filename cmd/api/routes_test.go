package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/storage"
)

// appRoutes builds the public app exactly as `playhead serve` does (buildAPI, the default
// configuration) and returns its routes, middleware left out.
func appRoutes(t *testing.T) []fiber.Route {
	t.Helper()
	dbURL := pgtest.URL(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("PLAYHEAD_JWT_SECRET", binarytest.Secret)
	t.Setenv("PLAYHEAD_SPILL_DIR", t.TempDir()) // not ./data/spill beside the sources
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	logger := slog.New(slog.DiscardHandler)
	n := &node{cfg: cfg, logger: logger, reg: prometheus.NewRegistry(), pool: pool, health: httpserver.NewHealth(pool.Ping, logger)}
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	app, err := n.buildAPI(ctx, store, "", notify.NewListener(dbURL, logger))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range n.services { // never started: their Stop is a no-op or a final flush
			if err := s.Stop(ctx); err != nil {
				t.Error(err)
			}
		}
		n.closeAll()
	}()
	return app.GetRoutes(true)
}
