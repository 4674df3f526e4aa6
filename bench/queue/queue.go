// Package queue measures Playhead's job queue (jobqueue) beside River on one PostgreSQL
// cluster: the same number of no-op jobs queued before the clock starts, the same worker
// counts and pool sizes, each system in its own database, the two systems alternating so
// that the machine's other load falls on both. It prints each round and, at the end, the
// medians and the ratio Playhead / River (docs/benchmarks/README.md, "The queue
// beside River").
package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver Playhead's migrations run on

	"github.com/playhead/playhead/migrations"
)

// Config is one side-by-side run.
type Config struct {
	// URL is an administrator's URL of the cluster; the run creates its two databases there.
	URL string
	// Jobs is how many no-op jobs each measurement works off.
	Jobs int
	// Workers are the worker counts to measure (River's MaxWorkers, Playhead's Concurrency).
	Workers []int
	// Rounds is how many times each system is measured at each worker count.
	Rounds int
	// MaxConns caps each system's pool.
	MaxConns int
	// Systems are the systems measured, in their alternating order: "playhead", "river", and
	// "playhead-media" (the same queue with the media kinds' hooks: no batching).
	Systems []string
}

// system is one queue under measurement.
type system interface {
	// run queues jobs no-op jobs, then starts workers workers and returns the time from their
	// start to the moment the database holds every job finished.
	run(ctx context.Context, jobs, workers int) (time.Duration, error)
	close()
}

// Run measures every system of cfg and writes the rounds and the summary to out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	systems := map[string]system{}
	defer func() {
		for _, s := range systems {
			s.close()
		}
	}()
	for _, name := range cfg.Systems {
		var s system
		var err error
		switch name {
		case "playhead", "playhead-media":
			s, err = newPlayhead(ctx, cfg, name == "playhead-media")
		case "river":
			s, err = newRiver(ctx, cfg)
		default:
			err = fmt.Errorf("unknown system %q (want playhead, playhead-media or river)", name)
		}
		if err != nil {
			return err
		}
		systems[name] = s
	}

	rates := map[string]map[int][]float64{}
	for _, name := range cfg.Systems {
		rates[name] = map[int][]float64{}
	}
	fmt.Fprintf(out, "queue: %d no-op jobs per measurement, workers %v, %d rounds, systems %v alternating\n",
		cfg.Jobs, cfg.Workers, cfg.Rounds, cfg.Systems)
	for round := 1; round <= cfg.Rounds; round++ {
		for _, workers := range cfg.Workers {
			// The order alternates from round to round as well, so neither system always
			// runs right after the other.
			order := slices.Clone(cfg.Systems)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			for _, name := range order {
				d, err := systems[name].run(ctx, cfg.Jobs, workers)
				if err != nil {
					return fmt.Errorf("%s, %d workers, round %d: %w", name, workers, round, err)
				}
				rate := float64(cfg.Jobs) / d.Seconds()
				rates[name][workers] = append(rates[name][workers], rate)
				fmt.Fprintf(out, "round %d  workers %3d  %-8s %8.0f jobs/s\n", round, workers, name, rate)
			}
		}
	}
	summarize(out, cfg, rates)
	return nil
}

func summarize(out io.Writer, cfg Config, rates map[string]map[int][]float64) {
	fmt.Fprintf(out, "\nmedians of %d rounds, jobs/s:\n", cfg.Rounds)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"workers"}
	for _, name := range cfg.Systems {
		header = append(header, name, name+" runs")
	}
	both := slices.Contains(cfg.Systems, "playhead") && slices.Contains(cfg.Systems, "river")
	if both {
		header = append(header, "playhead / river")
	}
	fmt.Fprintln(w, strings.Join(header, "\t")+"\t")
	for _, workers := range cfg.Workers {
		row := []string{fmt.Sprint(workers)}
		for _, name := range cfg.Systems {
			row = append(row, fmt.Sprintf("%.0f", median(rates[name][workers])), runs(rates[name][workers]))
		}
		if both {
			row = append(row, fmt.Sprintf("%.2f", median(rates["playhead"][workers])/median(rates["river"][workers])))
		}
		fmt.Fprintln(w, strings.Join(row, "\t")+"\t")
	}
	w.Flush()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func runs(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " / ")
}

// createDatabase creates database name on the cluster at adminURL (dropping an old one) and
// returns its URL.
func createDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// openPool opens a pool of at most maxConns connections on url.
func openPool(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(maxConns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// migratePlayhead applies Playhead's migrations to the database at url.
func migratePlayhead(ctx context.Context, url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = migrations.Up(ctx, db)
	return err
}

// waitUntil polls done every millisecond until it is true, failing after limit: the end of a
// measurement is the moment the database says so, the same probe for both systems.
func waitUntil(ctx context.Context, limit time.Duration, done func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done(ctx)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("jobs still unfinished after " + limit.String())
		}
		time.Sleep(time.Millisecond)
	}
}
