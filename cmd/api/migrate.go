package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/playhead/playhead/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("migrate takes no arguments (it reads PLAYHEAD_DATABASE_DIRECT_URL or DATABASE_URL)")
	}
	// goose's lock is a session advisory lock: the direct URL when there is one, as serve does.
	name := "PLAYHEAD_DATABASE_DIRECT_URL"
	dbURL := os.Getenv(name)
	if dbURL == "" {
		name, dbURL = "DATABASE_URL", os.Getenv("DATABASE_URL")
	}
	if dbURL == "" {
		return errors.New("DATABASE_URL is required")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer pool.Close()
	return migrate(ctx, pool, func(msg string) { fmt.Println(msg) })
}

// migrate applies pending migrations through pool and reports each one applied.
func migrate(ctx context.Context, pool *pgxpool.Pool, report func(string)) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	results, err := migrations.Up(ctx, db)
	for _, r := range results {
		report(fmt.Sprintf("applied %s in %s", r.Source.Path, r.Duration))
	}
	if err != nil {
		return err
	}
	if len(results) == 0 {
		report("schema is up to date")
	}
	return nil
}
