// Command benchqueue runs Playhead's job queue and River side by side on one PostgreSQL
// cluster with default settings (fsync on), alternating, and prints both rates, the medians
// and their ratio. Without -database-url it starts a cluster of its own (initdb into a
// temporary directory, PostgreSQL's defaults) and removes it at the end.
//
//	go run ./cmd/benchqueue -jobs 2000 -workers 1,4,16,100 -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/playhead/playhead/bench/queue"
	"github.com/playhead/playhead/internal/pgtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchqueue:", err)
		os.Exit(1)
	}
}

func run() error {
	jobs := flag.Int("jobs", 2000, "no-op jobs per measurement")
	workers := flag.String("workers", "1,4,16,100", "worker counts, comma-separated")
	rounds := flag.Int("rounds", 3, "measurements of each system at each worker count")
	maxConns := flag.Int("max-conns", 20, "connections in each system's pool")
	systems := flag.String("systems", "playhead,river", "systems to measure, in alternating order: playhead, river, playhead-media")
	url := flag.String("database-url", "", "an administrator's URL of an existing cluster (default: start one with PostgreSQL's defaults)")
	flag.Parse()

	cfg := queue.Config{URL: *url, Jobs: *jobs, Rounds: *rounds, MaxConns: *maxConns, Systems: strings.Split(*systems, ",")}
	for _, w := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return fmt.Errorf("-workers: %q is not a positive integer", w)
		}
		cfg.Workers = append(cfg.Workers, n)
	}
	if cfg.Jobs < 1 || cfg.Rounds < 1 || cfg.MaxConns < 2 {
		return fmt.Errorf("-jobs and -rounds must be positive, -max-conns at least 2")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.URL == "" {
		server, err := pgtest.StartDurable()
		if err != nil {
			return fmt.Errorf("start a PostgreSQL cluster: %w", err)
		}
		defer server.Close()
		cfg.URL = server.URL("postgres")
		fmt.Printf("PostgreSQL cluster with default settings (fsync on) at %s\n", cfg.URL)
	}
	return queue.Run(ctx, cfg, os.Stdout)
}
