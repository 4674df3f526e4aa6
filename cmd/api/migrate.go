package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/playhead/playhead/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("migrate takes no arguments (it reads PLAYHEAD_DATABASE_DIRECT_URL or DATABASE_URL)")
	}
	// goose's lock is a session advisory lock and pgx prepares named statements: the direct
	// URL (DATABASE_URL unless set), validated as serve validates it, so that a transaction
	// pooler without a direct URL is refused here too.
	cfg, err := loadDatabaseConfig()
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseDirectURL)
	if err != nil {
		return fmt.Errorf("PLAYHEAD_DATABASE_DIRECT_URL: %w", err)
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
