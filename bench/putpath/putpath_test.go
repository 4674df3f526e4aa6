package putpath

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/bench/internal/stats"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/proccpu"
)

var (
	rounds   = flag.Int("rounds", 3, "alternating rounds (bare Fiber, then Playhead)")
	duration = flag.Duration("duration", 10*time.Second, "length of one wrk run")
	warmUp   = flag.Duration("warmup", 5*time.Second, "one wrk run on each server before the rounds (after one report of each member to Playhead), not counted")
	members  = flag.Int("members", 150_000, "members, each with its own token")
	mediaN   = flag.Int("media", 100, "media items the reports spread over")
	profile  = flag.String("cpuprofile", "", "write Playhead's CPU profile (/debug/pprof/profile on its metrics port) of the last round to this file")
	noRanges = flag.Bool("compare-watched-ranges", false,
		"run a second Playhead with PLAYHEAD_WATCHED_RANGES=false (its own database, the same load) in each round (after Playhead in odd rounds, before it in even ones), and print both")
	baseline = flag.String("baseline", "",
		"run a second Playhead from this binary (an older build: its own database, migrated by it, the same load) in each round (after Playhead in odd rounds, before it in even ones), and print both; a relative path is from bench/putpath, where go test runs")
	markers = flag.Bool("markers", false,
		"mark an intro (the first 30 s) and credits (the last 8 minutes) on every media of the Playhead under test, so its flush and list read the credits into the resume rule; the second Playhead's media get none")
	compareQuality = flag.Bool("compare-quality", false,
		"make the reports to Playhead carry the optional playback-quality fields (time played and the rendition in each, stalls in one member's in 20), and run a second Playhead, the same binary, whose reports carry none (its own database, the same load) in each round, and print both")
	compareJWKS = flag.Bool("compare-jwks", false,
		"run Playhead in the JWKS file mode, every member's token signed by an RS256 key (a provider's usual algorithm and its longest tokens), and a second Playhead, the same binary, with the shared secret's HS256 tokens (its own database, the same load) in each round, and print both")
)

// envBare names the bare Fiber binary (bench/cmd/barefiber); `make bench-put` builds it and
// the playhead binary (PLAYHEAD_TEST_BINARY, read by binarytest) before running this test.
const envBare = "PLAYHEAD_BENCH_BAREFIBER"

func TestMain(m *testing.M) { binarytest.Main(m) }

// TestPutPathSideBySide drives the bare Fiber server and Playhead (write-behind, every default
// feature on) with the same wrk load, alternating, and prints the rates and Playhead's share.
// It fails if any report was refused (a refused request is cheaper than an accepted one, so the
// share would lie) or if Playhead did not store every position it accepted.
func TestPutPathSideBySide(t *testing.T) {
	bare := os.Getenv(envBare)
	if bare == "" {
		t.Skipf("%s is not set: run `make bench-put`", envBare)
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatalf("wrk is not installed (scripts/deps.sh installs it): %v", err)
	}

	began := time.Now()
	bareURL, bareProc := startBare(t, bare)
	var jwks *keyTokens
	tokens := secretTokens
	if *compareJWKS {
		jwks = newKeyTokens(t)
		tokens = jwks.token
	}
	ph := binarytest.Start(t, jwks.env())
	reports, script := writeLoad(t, ph, tokens, *markers, *compareQuality)
	// The same load against a second Playhead, one that keeps no watched ranges or an
	// older build: one member, one media and one position per request as in ph's, on a
	// database of its own.
	var off *binarytest.Server
	var offReports []report
	var offScript []string
	offName := ""
	switch {
	case btoi(*noRanges)+btoi(*baseline != "")+btoi(*compareJWKS)+btoi(*compareQuality) > 1:
		t.Fatal("-compare-watched-ranges, -baseline, -compare-jwks and -compare-quality each ask for the second Playhead: choose one")
	case *compareJWKS:
		off, offName = binarytest.Start(t, nil), "HS256"
	case *compareQuality:
		off, offName = binarytest.Start(t, nil), "no quality"
	case *noRanges:
		off, offName = binarytest.Start(t, map[string]string{"PLAYHEAD_WATCHED_RANGES": "false"}), "ranges off"
	case *baseline != "":
		// The server runs in a temporary directory, where exec would look for a relative path.
		path, err := filepath.Abs(*baseline)
		if err != nil {
			t.Fatal(err)
		}
		// Its schema is its own: it migrates an empty database as it would in production.
		off, offName = binarytest.StartBinary(t, path, map[string]string{"DATABASE_URL": pgtest.EmptyURL(t)}), "baseline"
	}
	if off != nil {
		offReports, offScript = writeLoad(t, off, secretTokens, false, false)
	}
	t.Logf("servers up, %d tokens written after %s", *members, time.Since(began).Round(time.Millisecond))

	postmaster := postmasterPID(t)
	var clientAccepted int64
	// run drives url for d and returns wrk's counts and the CPU seconds that server and
	// PostgreSQL used meanwhile.
	run := func(url string, server int, d time.Duration) (wrkResult, float64, float64) {
		serverBefore, pgBefore := stats.CPUSeconds(proccpu.Process(server)), stats.CPUSeconds(proccpu.Tree(postmaster))
		load := script
		if off != nil && url == off.HTTPURL {
			load = offScript
		}
		r := runWrk(t, url, load, d)
		serverCPU, pgCPU := stats.CPUSeconds(proccpu.Process(server))-serverBefore, stats.CPUSeconds(proccpu.Tree(postmaster))-pgBefore
		if r.Status+r.Connect+r.Read+r.Write+r.Timeout != 0 {
			t.Fatalf("wrk against %s: %d non-2xx answers, socket errors connect %d read %d write %d timeout %d",
				url, r.Status, r.Connect, r.Read, r.Write, r.Timeout)
		}
		if url == ph.HTTPURL {
			// Playhead writes behind: when wrk stops, its buffer still flushes to PostgreSQL.
			// Let it finish, or that work lands in the next bare Fiber run and lowers its rate
			// (the share of a round then depends on what the previous round left behind).
			waitDrained(t, ph)
		}
		if off != nil && url == off.HTTPURL {
			waitDrained(t, off)
		}
		return r, serverCPU, pgCPU
	}
	barePID, phPID := bareProc.Cmd.Process.Pid, ph.Cmd.Process.Pid
	clientAccepted += sendEach(t, ph, reports)
	if jwks != nil {
		resolveMembers(t, ph, reports)
	}
	t.Logf("every member reported once after %s", time.Since(began).Round(time.Millisecond))
	run(bareURL, barePID, *warmUp)
	warm, _, _ := run(ph.HTTPURL, phPID, *warmUp)
	clientAccepted += warm.Requests
	var offAccepted int64
	var offPGCPUs, offCPUs []float64
	if off != nil {
		offAccepted += sendEach(t, off, offReports)
		w, _, _ := run(off.HTTPURL, off.Cmd.Process.Pid, *warmUp)
		offAccepted += w.Requests
	}

	fmt.Printf("\nPUT /v1/playback/{id}: wrk -t2 -c200 -d%s, %d members with their own tokens, %d media, keep-alive\n", *duration, *members, *mediaN)
	fmt.Printf("CPU µs/req: CPU time the server (PostgreSQL: all its processes, during Playhead's run; wrk: both runs, reading its requests included) used, per request answered\n\n")
	fmt.Println("| round | bare Fiber | Playhead write-behind | share | bare CPU µs/req | Playhead CPU µs/req | PostgreSQL CPU µs/req | wrk CPU µs/req |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var bareRates, phRates, shares, bareCPUs, phCPUs, pgCPUs, wrkCPUs []float64
	perReq := func(cpu float64, r wrkResult) float64 { return cpu * 1e6 / float64(r.Requests) }
	// runOff drives the second Playhead. It runs after Playhead in odd rounds and before it in
	// even ones: PostgreSQL's background work (autovacuum, the WAL writer) after one server's
	// run lands in the next one's, and alternating spreads that over both.
	runOff := func() {
		if off == nil {
			return
		}
		o, offCPU, offPG := run(off.HTTPURL, off.Cmd.Process.Pid, *duration)
		offAccepted += o.Requests
		offCPUs, offPGCPUs = append(offCPUs, perReq(offCPU, o)), append(offPGCPUs, perReq(offPG, o))
	}
	for i := 1; i <= *rounds; i++ {
		b, bareCPU, _ := run(bareURL, barePID, *duration)
		if i%2 == 0 {
			runOff()
		}
		var profiled <-chan error
		if *profile != "" && i == *rounds {
			profiled = profileCPU(t, ph, *profile, *duration)
		}
		p, phCPU, pgCPU := run(ph.HTTPURL, phPID, *duration)
		if profiled != nil {
			if err := <-profiled; err != nil {
				t.Errorf("CPU profile: %v", err)
			}
		}
		clientAccepted += p.Requests
		bareRates, phRates, shares = append(bareRates, b.Rate()), append(phRates, p.Rate()), append(shares, p.Rate()/b.Rate())
		bareCPUs, phCPUs, pgCPUs = append(bareCPUs, perReq(bareCPU, b)), append(phCPUs, perReq(phCPU, p)), append(pgCPUs, perReq(pgCPU, p))
		wrkCPUs = append(wrkCPUs, perReq(b.CPU+p.CPU, wrkResult{Requests: b.Requests + p.Requests}))
		fmt.Printf("| %d | %s req/s | %s req/s | %.0f%% | %.1f | %.1f | %.1f | %.1f |\n", i, group(b.Rate()), group(p.Rate()), 100*shares[i-1],
			bareCPUs[i-1], phCPUs[i-1], pgCPUs[i-1], wrkCPUs[i-1])
		if i%2 == 1 {
			runOff()
		}
	}
	fmt.Printf("| median | %s req/s | %s req/s | %.0f%% | %.1f | %.1f | %.1f | %.1f |\n\n", group(stats.Median(bareRates)), group(stats.Median(phRates)), 100*stats.Median(shares),
		stats.Median(bareCPUs), stats.Median(phCPUs), stats.Median(pgCPUs), stats.Median(wrkCPUs))
	if off != nil {
		switch {
		case *noRanges:
			fmt.Println("Watched ranges, the same rounds: Playhead with them on (the column above) and off")
		case *compareJWKS:
			fmt.Println("The same rounds: Playhead in the JWKS file mode, RS256 tokens (the column above), and in the shared secret's mode, HS256 tokens")
		case *compareQuality:
			fmt.Println("The same rounds: reports with the playback-quality fields (the column above) and the same binary's reports without them")
		default:
			fmt.Printf("The same rounds: Playhead under test (the column above) and the baseline, %s\n", *baseline)
		}
		fmt.Printf("| round | PostgreSQL CPU µs/req, Playhead | %[1]s | Playhead − %[1]s | Playhead / %[1]s | Playhead CPU µs/req | %[1]s | Playhead / %[1]s |\n", offName)
		fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		var diffs, ratios, cpuRatios []float64
		for i := range offPGCPUs {
			diffs, ratios = append(diffs, pgCPUs[i]-offPGCPUs[i]), append(ratios, pgCPUs[i]/offPGCPUs[i])
			cpuRatios = append(cpuRatios, phCPUs[i]/offCPUs[i])
			fmt.Printf("| %d | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %.3f |\n", i+1, pgCPUs[i], offPGCPUs[i], diffs[i], ratios[i], phCPUs[i], offCPUs[i], cpuRatios[i])
		}
		fmt.Printf("| median | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %.3f |\n\n", stats.Median(pgCPUs), stats.Median(offPGCPUs), stats.Median(diffs), stats.Median(ratios),
			stats.Median(phCPUs), stats.Median(offCPUs), stats.Median(cpuRatios))
	}
	printHOTShare(t, "Playhead", ph)
	if off != nil {
		printHOTShare(t, offName, off)
	}
	t.Logf("load done after %s", time.Since(began).Round(time.Millisecond))
	// Every report of a member carries the same position, so a row the buffer lost once would
	// be written again by the member's next report and no count could miss it. So every member
	// reports once more, with a new position: that one must be stored.
	final := finalReports(reports)
	droppedBefore := metrics(t, ph)[droppedMetric]
	clientAccepted += sendEach(t, ph, final)
	checkNothingLost(t, ph, clientAccepted, final, droppedBefore)
	if off != nil {
		offFinal := finalReports(offReports)
		offDropped := metrics(t, off)[droppedMetric]
		offAccepted += sendEach(t, off, offFinal)
		checkNothingLost(t, off, offAccepted, offFinal, offDropped)
	}
	t.Logf("drained and stopped after %s", time.Since(began).Round(time.Millisecond))
}

// finalReports are reports, each with its position one millisecond further.
func finalReports(reports []report) []report {
	final := make([]report, len(reports))
	for i, r := range reports {
		r.position++
		final[i] = r.withBody()
	}
	return final
}

// startBare runs the bare Fiber server on a free loopback port and waits until it accepts
// connections.
func startBare(t *testing.T, bin string) (string, *binarytest.Process) {
	addr := binarytest.FreeAddr(t)
	p := binarytest.StartProcess(t, exec.Command(bin, "-addr", addr))
	giveUp := time.Now().Add(binarytest.ReadyTimeout)
	for {
		if exited, err := p.Exited(); exited {
			t.Fatalf("barefiber exited before it listened (%v): %s", err, p.Stdout)
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return "http://" + addr, p
		}
		if time.Now().After(giveUp) {
			t.Fatalf("barefiber not listening on %s after %s", addr, binarytest.ReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postmasterPID returns the pid of the test PostgreSQL's postmaster (the first line of its
// postmaster.pid).
func postmasterPID(t *testing.T) int {
	dir := pgtest.Shared(t).DataDir
	if dir == "" {
		t.Fatalf("the benchmark counts PostgreSQL's CPU time, so it starts its own cluster: unset %s", pgtest.EnvURL)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}

// profileCPU profiles Playhead's CPU for half of d once its request count starts to grow (wrk
// first reads its requests) and writes the profile to path; the channel carries the outcome.
func profileCPU(t *testing.T, ph *binarytest.Server, path string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	before := ph.Metric(t, "playhead_http_requests_total")
	go func() {
		for giveUp := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			_, body, err := ph.Do(http.MethodGet, ph.MetricsURL+"/metrics", "", nil)
			if err == nil && requestsTotal(string(body)) > before {
				break
			}
			if time.Now().After(giveUp) {
				done <- errors.New("the load did not start within a minute")
				return
			}
		}
		seconds := max(1, int(d.Seconds())/2)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", ph.MetricsURL, seconds))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("status %d", resp.StatusCode)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return done
}

// requestsTotal sums playhead_http_requests_total in a /metrics text.
func requestsTotal(metricsText string) float64 {
	var total float64
	for line := range strings.Lines(metricsText) {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok && strings.HasPrefix(name, "playhead_http_requests_total{") {
			v, _ := strconv.ParseFloat(value, 64)
			total += v
		}
	}
	return total
}

// report is one request of the load: a member's PUT of a position for a media.
type report struct {
	member, media int64
	position      int
	token         string
	body          string
	// subject is the token's sub in the JWKS mode (then member is the id the node gave it,
	// set by resolveMembers), "" with the secret.
	subject string
	// quality makes the body carry the playback-quality fields @playhead/player sends with a
	// report while playing: the time played and the rendition, and for one member in 20 a stall.
	quality bool
}

// withBody returns r with the body of its position (and its quality).
func (r report) withBody() report {
	switch {
	case !r.quality:
		r.body = fmt.Sprintf(`{"position_ms": %d}`, r.position)
	case r.member%20 == 0:
		r.body = fmt.Sprintf(`{"position_ms": %d, "quality": {"played_ms": 4200, "rebuffer_count": 1, "rebuffer_ms": 800, "rendition_height": 720}}`, r.position)
	default:
		r.body = fmt.Sprintf(`{"position_ms": %d, "quality": {"played_ms": 5000, "rendition_height": 720}}`, r.position)
	}
	return r
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeLoad registers the media on Playhead and writes, as a Lua list for putpath.lua, one
// formatted request per member (in random order): a PUT of a random position for a random
// media with the member's own token from tokens. It returns the reports and the arguments for
// wrk's -s. With markers, each media gets an intro and credits; with quality, each report
// carries the playback-quality fields.
func writeLoad(t *testing.T, ph *binarytest.Server, tokens tokenFunc, markers, quality bool) ([]report, []string) {
	admin, _, err := tokens(1, true)
	if err != nil {
		t.Fatal(err)
	}
	media := make([]int64, *mediaN)
	for i := range media {
		media[i] = ph.CreateMedia(t, admin, fmt.Sprintf("bench %d", i))
		if markers {
			ph.MustDo(t, http.StatusOK, http.MethodPut, ph.URL("/v1/media/%d/markers", media[i]), admin, map[string]any{
				"intro":   map[string]int{"start_ms": 0, "end_ms": 30_000},
				"credits": map[string]int{"start_ms": binarytest.MediaDurationMS - 480_000, "end_ms": binarytest.MediaDurationMS},
			})
		}
	}
	reports := make([]report, *members)
	for i, m := range rand.Perm(*members) {
		reports[i] = report{member: int64(1000 + m), media: media[rand.IntN(len(media))],
			position: 1000 + rand.IntN(binarytest.MediaDurationMS-2000), quality: quality}.withBody()
	}
	// Signing 150 000 RS256 tokens takes minutes on one core: on every core.
	var wg sync.WaitGroup
	errs := make([]error, runtime.NumCPU())
	for w := range errs {
		wg.Go(func() {
			for i := w; i < len(reports) && errs[w] == nil; i += len(errs) {
				reports[i].token, reports[i].subject, errs[w] = tokens(reports[i].member, false)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("return {\n")
	for _, r := range reports {
		req := fmt.Sprintf("PUT /v1/playback/%d HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", r.media, r.token, len(r.body), r.body)
		fmt.Fprintf(&b, "%q,\n", req)
	}
	b.WriteString("}\n")
	data := filepath.Join(t.TempDir(), "requests.lua")
	if err := os.WriteFile(data, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("putpath.lua")
	if err != nil {
		t.Fatal(err)
	}
	return reports, []string{"-s", script, "--", data}
}

// sendEach sends every report once to Playhead, from a few concurrent clients, and returns how
// many were answered 204 (it fails the test on any other answer). It brings Playhead to its
// steady state before the rounds: a player reports every 5 s for as long as it watches with
// one token, which Playhead verifies once and then finds in its cache of verified tokens for
// up to 10 minutes (auth.cacheTTL), so in a short run without this most first reports would
// pay a full JWT verification that a real player pays once in 120 reports.
func sendEach(t *testing.T, ph *binarytest.Server, reports []report) int64 {
	const clients = 32
	var wg sync.WaitGroup
	var accepted atomic.Int64
	failures := make(chan string, clients)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(reports); i += clients {
				r := reports[i]
				req, _ := http.NewRequest(http.MethodPut, ph.URL("/v1/playback/%d", r.media), strings.NewReader(r.body))
				req.Header.Set("Authorization", "Bearer "+r.token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := ph.Client.Do(req)
				if err != nil {
					failures <- err.Error()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					failures <- fmt.Sprintf("status %d", resp.StatusCode)
					return
				}
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatalf("a report of the warm-up failed: %s", f)
	}
	return accepted.Load()
}

// wrkResult is what putpath.lua's done() prints.
type wrkResult struct {
	Requests   int64 `json:"requests"`
	DurationUS int64 `json:"duration_us"`
	Connect    int64 `json:"connect"`
	Read       int64 `json:"read"`
	Write      int64 `json:"write"`
	Status     int64 `json:"status"`
	Timeout    int64 `json:"timeout"`
	// CPU is the CPU seconds wrk used, reading its requests at start included.
	CPU float64 `json:"-"`
}

// Rate is the requests answered per second.
func (r wrkResult) Rate() float64 { return float64(r.Requests) / (float64(r.DurationUS) / 1e6) }

func runWrk(t *testing.T, url string, script []string, d time.Duration) wrkResult {
	args := append([]string{"-t2", "-c200", "-d" + strconv.Itoa(int(d.Seconds())) + "s", url}, script...)
	cmd := exec.Command("wrk", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	for line := range strings.Lines(string(out)) {
		if raw, ok := strings.CutPrefix(line, "WRK "); ok {
			var r wrkResult
			if err := json.Unmarshal([]byte(raw), &r); err != nil {
				t.Fatalf("wrk summary %q: %v", raw, err)
			}
			r.CPU = cpu
			return r
		}
	}
	t.Fatalf("wrk printed no summary:\n%s", out)
	return wrkResult{}
}

// checkNothingLost waits until Playhead's buffer is empty and checks that every report it
// answered 204 went into the buffer or was counted as dropped, that it lost nothing and wrote a
// row for every key it was handed, that the clients saw no more 204s than Playhead sent, and
// that each member's final report (the last one it sent, answered 204) is the stored position,
// but for at most one member per report dropped at the buffer's bound since droppedBefore.
// Then it stops Playhead, which must exit 0.
func checkNothingLost(t *testing.T, ph *binarytest.Server, clientAccepted int64, final []report, droppedBefore float64) {
	m := waitDrained(t, ph)
	answered := m[`playhead_http_requests_total{method="PUT",route="/v1/playback/:mediaID",status="204"}`]
	offered, coalesced, flushed := m["playhead_playback_buffer_offered_total"], m["playhead_playback_buffer_coalesced_total"], m["playhead_playback_buffer_flushed_rows_total"]
	// A report for a new key that finds the buffer's channel or key bound full is dropped, counted,
	// and still answered 204 (the player reports again in 5 s; docs/operations/guarantees.md): that
	// is the buffer's overload behaviour, printed here. Any other loss (a row the database refused,
	// a stop that could not write or spill) breaks a promise.
	dropped := m[droppedMetric]
	otherLost := m["playhead_playback_buffer_lost_total"] - dropped
	stored := binarytest.StoredPositions(t, ph.DBURL)
	rows := int64(len(stored))
	var notStored int
	for _, r := range final {
		if pos, ok := stored[binarytest.PlaybackKey{Member: r.member, Media: r.media}]; !ok || int(pos) != r.position {
			notStored++
		}
	}
	fmt.Printf("no promise lost: %.0f PUTs answered 204 (the warm-up and wrk counted %d; wrk does not count answers in flight when it stops): "+
		"%.0f offered to the buffer (%.0f coalesced) and %.0f dropped at its bound (counted); %.0f rows written, %.0f lost otherwise, %d playback rows, "+
		"%d of %d final reports not stored\n", answered, clientAccepted, offered, coalesced, dropped, flushed, otherLost, rows, notStored, len(final))
	// A key written while a newer report for it arrived is written again, so written rows may
	// exceed the keys announced (offered − coalesced); never fall short of them.
	announced := offered - coalesced
	switch {
	case answered < float64(clientAccepted):
		t.Errorf("the clients counted %d 2xx answers, but Playhead answered only %.0f PUTs 204", clientAccepted, answered)
	case offered+dropped != answered || otherLost != 0:
		t.Errorf("%.0f PUTs answered 204, but %.0f offered to the buffer, %.0f dropped and %.0f lost otherwise", answered, offered, dropped, otherLost)
	case flushed < announced:
		t.Errorf("the buffer is empty, but only %.0f rows were written for %.0f keys announced", flushed, announced)
	case rows == 0 || float64(rows) > announced:
		t.Errorf("%d playback rows after %.0f keys announced", rows, announced)
	case float64(notStored) > dropped-droppedBefore:
		t.Errorf("%d members' final reports (answered 204) are not the stored position, and only %.0f of them were dropped at the bound",
			notStored, dropped-droppedBefore)
	}
	ph.Stop(t)
}

// waitDrained waits until Playhead's buffer is empty and returns its metrics then.
func waitDrained(t *testing.T, ph *binarytest.Server) map[string]float64 {
	giveUp := time.Now().Add(2 * time.Minute)
	for {
		m := metrics(t, ph)
		if m["playhead_playback_buffer_held_keys"] == 0 && m["playhead_playback_buffer_depth"] == 0 {
			return m
		}
		if time.Now().After(giveUp) {
			t.Fatalf("the playback buffer still holds %v keys (%v in its channel) two minutes after the load",
				m["playhead_playback_buffer_held_keys"], m["playhead_playback_buffer_depth"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// droppedMetric counts the reports dropped at the buffer's bound (answered 204 by design).
const droppedMetric = `playhead_playback_buffer_lost_total{reason="full"}`

// metrics reads the samples of Playhead's /metrics; a sample with labels is keyed by its
// name and labels as printed, the sum over all label values by its bare name.
func metrics(t *testing.T, ph *binarytest.Server) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(ph.Metrics(t)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		out[fields[0]] = v
		if name, _, ok := strings.Cut(fields[0], "{"); ok {
			out[name] += v
		}
	}
	return out
}

// group prints a rate as whole requests with a thin space between thousands (99 830).
func group(rate float64) string {
	s := strconv.FormatInt(int64(rate+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// printHOTShare prints the share of the position updates in s's database that were HOT (no
// index touched), as PostgreSQL's statistics count them when the rounds are over.
func printHOTShare(t *testing.T, name string, s *binarytest.Server) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var upd, hot int64
	if err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'playback'`).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s: %d of %d playback updates HOT (%.3f), warm-up included\n", name, hot, upd, float64(hot)/float64(max(upd, 1)))
}
