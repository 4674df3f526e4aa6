package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/playhead/playhead/auth"
)

// runToken mints tokens with PLAYHEAD_JWT_SECRET. With --count N it prints N tokens, one per
// line, for members --member … --member+N-1: the token file a load test reads.
func runToken(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	member := fs.Int64("member", 0, "member id (the token's subject); required")
	admin := fs.Bool("admin", false, "include the admin role")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime of the token")
	count := fs.Int("count", 1, "mint this many tokens for consecutive member ids, one per line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *member <= 0:
		return errors.New("--member must be a positive member id")
	case *ttl <= 0:
		return errors.New("--ttl must be positive")
	case *count < 1:
		return errors.New("--count must be at least 1")
	}
	secret := os.Getenv("PLAYHEAD_JWT_SECRET")
	if len(secret) < auth.MinSecretBytes {
		return fmt.Errorf("PLAYHEAD_JWT_SECRET must be set to at least %d bytes", auth.MinSecretBytes)
	}
	for i := range int64(*count) {
		tok, err := auth.Mint([]byte(secret), *member+i, *admin, *ttl)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, tok); err != nil {
			return err
		}
	}
	return nil
}
