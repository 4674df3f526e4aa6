// Command playhead is the whole service in one binary: `serve` runs the API and the job
// runners (by role), `migrate` applies the schema, `config` lists every setting, `token` mints
// JWTs for development and load tests, `members link` maps a provider's subject to a member.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `usage: playhead <command> [flags]

commands:
  serve    run the service (configured by environment variables: playhead config)
  migrate  apply database migrations and exit
  config   list every setting with its default and meaning (--markdown: as a table)
  token    mint JWTs: playhead token --member N [--admin] [--ttl 24h] [--count K]
           or with a private key: playhead token --key FILE --subject S [--kid K] [--print-jwks]
  members  link a provider's subject to a member: playhead members link --issuer I --subject S --member N
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = runServe(ctx, args)
	case "migrate":
		err = runMigrate(ctx, args)
	case "config":
		err = runConfig(args, os.Stdout)
	case "token":
		err = runToken(args, os.Stdout)
	case "members":
		err = runMembers(ctx, args, os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "playhead: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "playhead %s: %v\n", os.Args[1], err)
		}
		os.Exit(1)
	}
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(strings.ToUpper(s)))
	return l, err
}

func newLogger(level string) *slog.Logger {
	l, _ := parseLogLevel(level) // validated with the config
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
