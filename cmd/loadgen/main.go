// Command loadgen plays the seed's continue-watching scenario against Playhead for machines
// without k6: N virtual players, each opening its media (POST) and reporting its position
// (PUT) every period, with a continue-watching list (GET) now and then.
//
// The arrival model is open: a dispatcher fires every player's request on its own schedule,
// whatever the server's response times, so a slow server cannot slow the offered load (it
// shows up as latency, errors or, when the client itself runs out of in-flight slots, as
// counted client drops). Latencies go into HDR histograms. Server figures are scraped from
// /metrics before, during and after. It only targets loopback addresses and stops by itself.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	targets     []string
	metricsURLs []string
	databaseURL string
	tokens      minter
	tokenTTL    time.Duration
	// rotate, when set, signs the players' tokens from rotateAt on: each player's next request
	// carries a token of the second key, as its token's re-issue would after a key rotation.
	rotate       *minter
	rotateAt     time.Duration
	players      int
	stages       []stage
	warmup       time.Duration // requests scheduled before this offset are counted apart
	period       time.Duration
	listEvery    int
	collection   string
	memberStart  int64
	mediaCount   int
	conns        int
	inflight     int
	timeout      time.Duration
	jsonPath     string
	markdownPath string
	label        string
	allowNonLoop bool
}

// stage ramps the active players linearly to target over dur.
type stage struct {
	dur    time.Duration
	target int
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	rep.print(os.Stdout)
	if opts.markdownPath != "" {
		f, err := os.OpenFile(opts.markdownPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			row := rep.markdownRow() + "\n"
			if info, serr := f.Stat(); serr == nil && info.Size() == 0 {
				row = markdownHeader + "\n" + row
			}
			_, err = f.WriteString(row)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
	}
	if opts.jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(opts.jsonPath, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
	}
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	targets := fs.String("targets", "http://127.0.0.1:8080", "comma-separated base URLs of Playhead nodes; players are spread over them")
	metrics := fs.String("metrics", "http://127.0.0.1:9464/metrics", "comma-separated /metrics URLs to scrape (empty: none)")
	dbURL := fs.String("database-url", "", "PostgreSQL URL, to report database transactions/s (optional)")
	players := fs.Int("players", 2000, "virtual players at the end of the ramp")
	ramp := fs.Duration("ramp", 10*time.Second, "time to ramp up to --players")
	hold := fs.Duration("duration", 60*time.Second, "time to hold --players after the ramp")
	stages := fs.String("stages", "", `ramp stages "dur:players,…" (overrides --ramp/--duration), e.g. "10s:2000,60s:2000,10s:0"`)
	period := fs.Duration("period", 5*time.Second, "interval between one player's position reports")
	listEvery := fs.Int("list-every", 60, "one continue-watching GET per this many reports (0: none): every 5 min by default, as a player reads the list on its home screen, not while it plays")
	collection := fs.String("collection", "", "also read this collection (GET /v1/collections/{name}, with the player's progress) each time a player reads its list")
	memberStart := fs.Int64("member-start", 1_000_000, "member id of the first player")
	mediaCount := fs.Int("media", 20, "media items to register (admin API) and spread players over")
	conns := fs.Int("conns", 512, "connections per target")
	inflight := fs.Int("inflight", 4096, "requests in flight at most; beyond it the client counts a drop instead of waiting")
	timeout := fs.Duration("timeout", 10*time.Second, "per-request timeout")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file")
	markdownPath := fs.String("markdown", "", "also append the run as one row of docs/benchmarks/README.md's load table to this file")
	label := fs.String("label", "", "a name for this run in the report")
	allowNonLoop := fs.Bool("allow-non-loopback", false, "permit targets that are not loopback addresses (never on shared machines)")
	signingKey := fs.String("signing-key", "", "sign tokens with this private key (JWK, or PEM with -signing-kid) instead of PLAYHEAD_JWT_SECRET: the node in the JWKS file mode")
	signingKID := fs.String("signing-kid", "", "the kid of -signing-key (default the JWK's)")
	rotateKey := fs.String("rotate-key", "", "the key players' tokens are signed with from -rotate-at on (JWK, or PEM with -rotate-kid)")
	rotateKID := fs.String("rotate-kid", "", "the kid of -rotate-key (default the JWK's)")
	rotateAt := fs.Duration("rotate-at", 0, "when players switch to tokens of -rotate-key, from the start of the run")
	issuer := fs.String("issuer", os.Getenv("PLAYHEAD_OIDC_ISSUER"), "the tokens' iss, with -signing-key")
	audience := fs.String("audience", os.Getenv("PLAYHEAD_OIDC_AUDIENCE"), "the tokens' aud, with -signing-key")
	tokenTTL := fs.Duration("token-ttl", 24*time.Hour, "lifetime of the players' tokens (a rotated token's from -rotate-at)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{
		targets: splitList(*targets), metricsURLs: splitList(*metrics), databaseURL: *dbURL,
		tokens: minter{secret: []byte(os.Getenv("PLAYHEAD_JWT_SECRET")), issuer: *issuer, audience: *audience,
			adminClaim: os.Getenv("PLAYHEAD_OIDC_ADMIN_CLAIM"), adminValue: os.Getenv("PLAYHEAD_OIDC_ADMIN_VALUE")},
		tokenTTL: *tokenTTL, rotateAt: *rotateAt, players: *players, period: *period, listEvery: *listEvery, collection: *collection,
		memberStart: *memberStart, mediaCount: *mediaCount, conns: *conns, inflight: *inflight,
		timeout: *timeout, jsonPath: *jsonPath, markdownPath: *markdownPath, label: *label, allowNonLoop: *allowNonLoop,
	}
	if *stages != "" {
		var err error
		if o.stages, err = parseStages(*stages); err != nil {
			return o, err
		}
	} else {
		o.stages = []stage{{*ramp, *players}, {*hold, *players}}
	}
	// Latencies and rates describe the steady state: the first stage (the ramp, with every
	// player's POST) is counted apart, unless it is the only one.
	if len(o.stages) > 1 {
		o.warmup = o.stages[0].dur
	}
	for _, s := range o.stages {
		o.players = max(o.players, s.target)
	}
	if *signingKey != "" {
		var err error
		if o.tokens, err = keyMinter(o.tokens, *signingKey, *signingKID); err != nil {
			return o, err
		}
	}
	if *rotateKey != "" {
		if *signingKey == "" || *rotateAt <= 0 {
			return o, errors.New("-rotate-key needs -signing-key and a positive -rotate-at")
		}
		m, err := keyMinter(o.tokens, *rotateKey, *rotateKID)
		if err != nil {
			return o, err
		}
		o.rotate = &m
	}
	switch {
	case len(o.targets) == 0:
		return o, errors.New("--targets is empty")
	case o.tokens.key == nil && len(o.tokens.secret) < 32:
		return o, errors.New("PLAYHEAD_JWT_SECRET must be set (the server's secret): players' tokens are minted with it (or sign them with -signing-key)")
	case o.tokenTTL <= o.rotateAt:
		return o, errors.New("-token-ttl must outlast -rotate-at: the first key's tokens would expire before the rotation")
	case o.players < 1 || o.mediaCount < 1 || o.conns < 1 || o.inflight < 1 || o.period <= 0:
		return o, errors.New("--players, --media, --conns, --inflight and --period must be positive")
	}
	for _, t := range append(append([]string{}, o.targets...), o.metricsURLs...) {
		if err := checkLoopback(t, o.allowNonLoop); err != nil {
			return o, err
		}
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.TrimSuffix(p, "/"))
		}
	}
	return out
}

func parseStages(s string) ([]stage, error) {
	var out []stage
	for _, part := range splitList(s) {
		d, n, ok := strings.Cut(part, ":")
		dur, err1 := time.ParseDuration(d)
		target, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || dur <= 0 || target < 0 {
			return nil, fmt.Errorf("bad stage %q: want duration:players, e.g. 30s:2000", part)
		}
		out = append(out, stage{dur, target})
	}
	return out, nil
}

// checkLoopback refuses targets off this machine: load from a shared machine goes to
// loopback only.
func checkLoopback(raw string, allow bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("bad URL %q", raw)
	}
	host := u.Hostname()
	if allow || host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" {
		return nil
	}
	return fmt.Errorf("target %s is not a loopback address (use --allow-non-loopback on your own infrastructure)", raw)
}
