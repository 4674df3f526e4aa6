package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/members"
)

// runMembers runs `playhead members link --issuer I --subject S --member N`: it maps a
// provider's subject to an existing member of the shared-secret mode, for a platform moving to
// its identity provider (docs/operations/identity.md).
func runMembers(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "link" {
		return errors.New("usage: playhead members link --issuer I --subject S --member N")
	}
	fs := flag.NewFlagSet("members link", flag.ContinueOnError)
	issuer := fs.String("issuer", "", "the provider's issuer, exactly as its tokens' iss says; required")
	subject := fs.String("subject", "", "the member's subject at that provider (the tokens' sub); required")
	member := fs.Int64("member", 0, "the member id the shared-secret tokens named; required")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *issuer == "" || *subject == "" || *member == 0 {
		return errors.New("--issuer, --subject and --member are required")
	}
	cfg, err := loadDatabaseConfig()
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer pool.Close()
	if err := members.Link(ctx, pool, *issuer, *subject, *member); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "linked %s at %s to member %d\n", *subject, *issuer, *member)
	return err
}
