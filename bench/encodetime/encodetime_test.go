package encodetime

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/bench/internal/stats"
	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/proccpu"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

var (
	rounds     = flag.Int("rounds", 3, "alternating rounds of the setups (each round starts one setup later: a b c, b c a, c a b, …)")
	seconds    = flag.Int("seconds", 60, "length of the generated 1920×1080 source with audio, seconds")
	fps        = flag.Int("fps", 30, "frame rate of the generated source")
	preset     = flag.String("preset", "veryfast", "PLAYHEAD_ENCODE_PRESET of every process (veryfast is the production default)")
	setupNames = flag.String("setups", "renditions-1,renditions-2,single,per-rung-2", "the setups to run, comma-separated, in the order of the first round")
	// Not a speed check: an upload that takes this long is stuck, and the test says so.
	readyWithin = flag.Duration("ready-within", 30*time.Minute, "safety net: an upload not READY this long after its 202 fails the test")
)

// envRun must be set (make bench-encode sets it) for TestEncodeTime to run: it takes about 25
// minutes on 2 cores, so a plain `go test ./...` of the bench module skips it.
const envRun = "PLAYHEAD_BENCH_ENCODE"

// pollEvery is how often the media (GET /v1/media/{id}) and its jobs are read while it encodes.
const pollEvery = 100 * time.Millisecond

func TestMain(m *testing.M) { binarytest.Main(m) }

// setup is one way to run the encode.
type setup struct {
	name    string // as -setups names it
	label   string // as the tables name it
	mode    string // PLAYHEAD_ENCODE_MODE
	jobs    int    // PLAYHEAD_ENCODE_RENDITION_JOBS (renditions mode)
	workers int    // role=worker processes beside the role=api one
	// pinned puts worker i on CPU i alone (taskset), with its ffmpeg children: a model of
	// one-core worker machines, as many as the workers, on this one machine (ffmpeg and x264
	// size their threads by the CPUs they may use, as on a machine of that size).
	pinned bool
}

var setups = []setup{
	{name: "renditions-1", label: "(a) renditions, 2 jobs, 1 worker", mode: "renditions", jobs: 2, workers: 1},
	{name: "renditions-2", label: "(b) renditions, 2 jobs, 2 workers", mode: "renditions", jobs: 2, workers: 2},
	{name: "single", label: "(c) single, 1 worker", mode: "single", jobs: 2, workers: 1},
	{name: "per-rung-2", label: "(d) renditions, a job per rung, 2 workers", mode: "renditions", jobs: 5, workers: 2},
	{name: "renditions-2-pinned", label: "(e) renditions, 2 jobs, 2 workers, a core each", mode: "renditions", jobs: 2, workers: 2, pinned: true},
	{name: "single-pinned", label: "(f) single, 1 worker, one core", mode: "single", jobs: 2, workers: 1, pinned: true},
	{name: "renditions-1-pinned", label: "(g) renditions, 2 jobs, 1 worker, one core", mode: "renditions", jobs: 2, workers: 1, pinned: true},
}

// outcome is what one upload to one setup measured.
type outcome struct {
	// playable and ready are seconds from media.created_at (the upload's commit, just before its
	// 202) to media.playable_at and to the READY update (media.updated_at then). A media
	// encoded as one job is playable only at READY: playable is ready then.
	playable, ready float64
	// seenPlayable and seenReady are seconds from the 202 to the first GET /v1/media/{id} (every
	// pollEvery) that answered playable while PROCESSING, and READY; seenPlayable is -1 when no
	// GET saw the media playable before it was READY.
	seenPlayable, seenReady float64
	// workerCPU is the CPU seconds the worker processes used from just before the upload to
	// READY, their ffmpeg and ffprobe children included (reaped by then); apiCPU the role=api
	// process's (it receives the upload and answers the polls).
	workerCPU, apiCPU float64
	// upload is the seconds POST /v1/media took, the file's bytes sent to the 202.
	upload float64
	jobs   []jobSpan
}

// jobSpan is one encode job of the upload, in seconds from media.created_at.
type jobSpan struct {
	id       int64
	kind     string
	heights  string // the rendition job's, as JSON ("[480,360]"); "" for the probe, the finish and a single encode
	node     string
	attempts int
	// started is when the poll that first saw the job PROCESSING began (-1: no poll did, it
	// ran between two), completed its completed_at.
	started, completed float64
}

// TestEncodeTime runs the rounds and prints the tables: per round, the medians, the ratios.
// It fails only for broken behaviour: a process that exits, a media FAILED, a job DEAD, an
// encode that is not READY within -ready-within, a group-encoded media never playable, a
// single-job encode playable before READY, a worker that does not stop cleanly.
func TestEncodeTime(t *testing.T) {
	if os.Getenv(envRun) == "" {
		t.Skipf("%s is not set: run `make bench-encode` (about 20 minutes on 2 cores)", envRun)
	}
	chosen := chosenSetups(t)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: *seconds, Width: 1920, Height: 1080, FPS: *fps, Audio: true})
	info, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nsource: testsrc2 1920×1080 %d fps %d s + 440 Hz sine (AAC), x264 ultrafast, %.1f MB; preset %s; "+
		"PLAYHEAD_ENCODE_CONCURRENCY 1 per process; job lease, poll interval: the defaults\n", *fps, *seconds, float64(info.Size())/1e6, *preset)
	fmt.Printf("machine: %d CPUs (%s); load average before: %s\n", runtime.NumCPU(), cpuModel(), loadAvg())
	fmt.Println("times from the upload's commit (media.created_at, just before its 202): to media.playable_at, to READY; " +
		"worker CPU: the worker processes with their ffmpeg children, upload to READY")

	results := map[string][]outcome{}
	for r := range *rounds {
		for i := range chosen {
			s := chosen[(r+i)%len(chosen)]
			var o outcome
			if !t.Run(fmt.Sprintf("round%d_%s", r+1, s.name), func(t *testing.T) { o = runSetup(t, s, src) }) {
				t.Fatalf("round %d, %s failed", r+1, s.label)
			}
			results[s.name] = append(results[s.name], o)
			printTimeline(r+1, s, o)
		}
	}
	printTables(chosen, results)
	fmt.Printf("load average after: %s\n\n", loadAvg())
}

// chosenSetups returns the setups -setups names, in its order.
func chosenSetups(t *testing.T) []setup {
	var chosen []setup
	for name := range strings.SplitSeq(*setupNames, ",") {
		i := slices.IndexFunc(setups, func(s setup) bool { return s.name == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("-setups: %q is none of the setups %v", name, setupList())
		}
		chosen = append(chosen, setups[i])
	}
	return chosen
}

// setupList is the setups' names, for -setups' error.
func setupList() []string {
	var names []string
	for _, s := range setups {
		names = append(names, s.name)
	}
	return names
}

// runSetup starts s on a fresh database and storage directory (a role=api process and
// s.workers role=worker processes, as in production but on one machine), uploads src once,
// follows it to READY and stops every process.
func runSetup(t *testing.T, s setup, src string) outcome {
	storageDir := t.TempDir()
	env := func(role, node string) map[string]string {
		return map[string]string{
			"PLAYHEAD_ROLE":                  role,
			"PLAYHEAD_NODE_ID":               node,
			"PLAYHEAD_STORAGE_DIR":           storageDir,
			"PLAYHEAD_ENCODE_MODE":           s.mode,
			"PLAYHEAD_ENCODE_PRESET":         *preset,
			"PLAYHEAD_ENCODE_RENDITION_JOBS": fmt.Sprint(s.jobs),
			"TMPDIR":                         t.TempDir(), // each process's encode scratch
		}
	}
	api := binarytest.Start(t, env("api", "bench-api"))
	var workers []*binarytest.Server
	for i := range s.workers {
		e := env("worker", fmt.Sprintf("w%d", i+1))
		e["DATABASE_URL"] = api.DBURL // the API's database
		w := binarytest.Start(t, e)
		if s.pinned {
			pin(t, w.Cmd.Process.Pid, i)
		}
		workers = append(workers, w)
	}
	pool := api.Pool(t)
	cpu := func() (worker, apiCPU float64) {
		for _, w := range workers {
			worker += stats.CPUSeconds(proccpu.Tree(w.Cmd.Process.Pid))
		}
		return worker, stats.CPUSeconds(proccpu.Tree(api.Cmd.Process.Pid))
	}
	workerBefore, apiBefore := cpu()

	owner := binarytest.Token(t, 34, false)
	sent := time.Now()
	id := api.Upload(t, owner, binarytest.Upload{Path: src, Title: "bench " + s.name, Visibility: "PRIVATE"})
	answered := time.Now()
	o := outcome{seenPlayable: -1, upload: answered.Sub(sent).Seconds()}
	var created time.Time
	query(t, pool, `SELECT created_at FROM media WHERE id = $1`, []any{id}, &created)

	started := map[int64]float64{}
	for {
		for _, p := range append([]*binarytest.Server{api}, workers...) {
			if exited, err := p.Exited(); exited {
				t.Fatalf("playhead pid %d exited while media %d encoded (%v); stderr:\n%s", p.Cmd.Process.Pid, id, err, p.Stderr)
			}
		}
		v := mediaOf(t, api, owner, id)
		seen := time.Since(answered).Seconds()
		if v.Status == string(media.StatusFailed) {
			t.Fatalf("media %d FAILED: %s", id, v.FailureReason)
		}
		if v.Playable && v.Status == string(media.StatusProcessing) && o.seenPlayable < 0 {
			o.seenPlayable = seen
		}
		polled := time.Since(created).Seconds()
		for _, j := range readJobs(t, pool, id) {
			if j.status == "DEAD" {
				t.Fatalf("media %d: job %d (%s) is DEAD: %s", id, j.id, j.kind, j.lastError)
			}
			if _, ok := started[j.id]; !ok && j.status == "PROCESSING" {
				started[j.id] = polled
			}
		}
		if v.Status == string(media.StatusReady) {
			o.seenReady = seen
			break
		}
		if time.Since(answered) > *readyWithin {
			t.Fatalf("media %d still %s (playable %v) %s after its upload: stuck (the -ready-within safety net)", id, v.Status, v.Playable, *readyWithin)
		}
		time.Sleep(pollEvery)
	}
	workerAfter, apiAfter := cpu()
	o.workerCPU, o.apiCPU = workerAfter-workerBefore, apiAfter-apiBefore

	var playableAt *time.Time
	var readyAt time.Time
	var status string
	query(t, pool, `SELECT playable_at, updated_at, status FROM media WHERE id = $1`, []any{id}, &playableAt, &readyAt, &status)
	o.ready = readyAt.Sub(created).Seconds()
	jobs := readJobs(t, pool, id)
	for _, j := range jobs {
		if j.status != "COMPLETED" || j.completedAt == nil {
			t.Fatalf("media %d is READY but its job %d (%s) is %s", id, j.id, j.kind, j.status)
		}
		span := jobSpan{id: j.id, kind: j.kind, heights: j.heights, node: j.node, attempts: j.attempts, started: -1,
			completed: j.completedAt.Sub(created).Seconds()}
		if at, ok := started[j.id]; ok {
			span.started = at
		}
		o.jobs = append(o.jobs, span)
	}
	kinds := map[string]int{}
	for _, j := range jobs {
		kinds[j.kind]++
	}
	switch {
	case status != string(media.StatusReady):
		t.Fatalf("media %d: GET said READY, the row says %s", id, status)
	case s.mode == "single" && (playableAt != nil || len(jobs) != 1 || kinds[encodejobs.KindEncode] != 1):
		t.Fatalf("media %d encoded as one job: playable_at %v, jobs %v; want no playable_at and one encode job", id, playableAt, kinds)
	case s.mode == "renditions" && (playableAt == nil || playableAt.After(readyAt) || kinds[encodejobs.KindEncode] != 1 ||
		kinds[encodejobs.KindRendition] < 2 || kinds[encodejobs.KindFinish] != 1):
		t.Fatalf("media %d encoded as a group: playable_at %v (READY at %v), jobs %v; want playable before READY, a probe, renditions, a finish",
			id, playableAt, readyAt, kinds)
	}
	o.playable = o.ready
	if playableAt != nil {
		o.playable = playableAt.Sub(created).Seconds()
	}
	for _, w := range workers {
		w.Stop(t)
	}
	api.Stop(t)
	return o
}

// pin restricts every thread of process pid, and so the children it starts later, to CPU
// cpu. A worker is ready, and idle, when binarytest.Start returns: no encode has started.
// taskset walks the process's threads one by one, so a thread created during the walk by one
// not yet pinned can escape it: pin checks every thread afterwards and pins again (a few
// times at most) until none has.
func pin(t *testing.T, pid, cpu int) {
	if cpu >= runtime.NumCPU() {
		t.Fatalf("pinning worker pid %d to CPU %d: this machine has %d CPUs", pid, cpu, runtime.NumCPU())
	}
	var loose []string
	for range 5 {
		if out, err := exec.Command("taskset", "--all-tasks", "--cpu-list", "--pid", fmt.Sprint(cpu), fmt.Sprint(pid)).CombinedOutput(); err != nil {
			t.Fatalf("taskset worker pid %d to CPU %d: %v\n%s", pid, cpu, err, out)
		}
		if loose = unpinned(t, pid, cpu); len(loose) == 0 {
			return
		}
	}
	t.Fatalf("worker pid %d: threads %v still run outside CPU %d after 5 taskset passes", pid, loose, cpu)
}

// unpinned returns the threads of process pid allowed on any CPU but cpu alone, from their
// Cpus_allowed_list in /proc.
func unpinned(t *testing.T, pid, cpu int) []string {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var loose []string
	for _, task := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if allowed, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(allowed) != fmt.Sprint(cpu) {
				loose = append(loose, task.Name()+":"+strings.TrimSpace(allowed))
			}
		}
	}
	return loose
}

// mediaView is the part of GET /v1/media/{id} the benchmark follows.
type mediaView struct {
	Status        string `json:"status"`
	Playable      bool   `json:"playable"`
	FailureReason string `json:"failure_reason"`
}

func mediaOf(t *testing.T, s *binarytest.Server, token string, id int64) mediaView {
	t.Helper()
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d", id), token, nil)
	var v mediaView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("GET /v1/media/%d: %s: %v", id, out, err)
	}
	return v
}

// jobRow is one encode job of a media as the jobs table holds it.
type jobRow struct {
	id          int64
	kind        string
	heights     string
	status      string
	node        string
	attempts    int
	completedAt *time.Time
	lastError   string
}

// readJobs reads the encode jobs of media id, in id order (a group's renditions lowest first).
func readJobs(t *testing.T, pool *pgxpool.Pool, id int64) []jobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `
		SELECT id, kind, coalesce(args->>'heights', ''), status, coalesce(claimed_by, ''), attempt_count, completed_at,
		       coalesce(last_error, '')
		FROM jobs WHERE subject_id = $1 AND kind = ANY($2) ORDER BY id`, id, encodejobs.Kinds)
	if err != nil {
		t.Fatalf("read the jobs of media %d: %v", id, err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobRow, error) {
		var j jobRow
		err := row.Scan(&j.id, &j.kind, &j.heights, &j.status, &j.node, &j.attempts, &j.completedAt, &j.lastError)
		return j, err
	})
	if err != nil {
		t.Fatalf("read the jobs of media %d: %v", id, err)
	}
	return jobs
}

// query scans the one row of sql into dest.
func query(t *testing.T, pool *pgxpool.Pool, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", strings.Join(strings.Fields(sql), " "), err)
	}
}

// printTimeline prints one upload's jobs: which worker ran each, from when a poll first saw it
// running (≈, to pollEvery) to its completion, with its attempts when more than one.
func printTimeline(round int, s setup, o outcome) {
	var parts []string
	for _, j := range o.jobs {
		name := strings.TrimPrefix(j.kind, "encode_")
		if j.heights != "" {
			var heights []int
			_ = json.Unmarshal([]byte(j.heights), &heights)
			name = strings.Trim(strings.ReplaceAll(fmt.Sprint(heights), " ", "p+"), "[]") + "p"
		}
		from := "?"
		if j.started >= 0 {
			from = fmt.Sprintf("≈%.1f", j.started)
		}
		part := fmt.Sprintf("%s %s–%.1f s %s", name, from, j.completed, j.node)
		if j.attempts > 1 {
			part += fmt.Sprintf(" (%d attempts)", j.attempts)
		}
		parts = append(parts, part)
	}
	seen := "never while PROCESSING"
	if o.seenPlayable >= 0 {
		seen = fmt.Sprintf("%.1f s", o.seenPlayable)
	}
	fmt.Printf("round %d %s: upload %.1f s; then playable %.2f s, READY %.2f s (GET saw playable %s, READY %.1f s after the 202); jobs: %s\n",
		round, s.label, o.upload, o.playable, o.ready, seen, o.seenReady, strings.Join(parts, " · "))
}

// printTables prints every round, the medians and the ratios between the setups.
func printTables(chosen []setup, results map[string][]outcome) {
	fmt.Println("\n| round | setup | playable, s | READY, s | playable / READY | worker CPU, s | cores busy | API CPU, s |")
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for r := range *rounds {
		for _, s := range chosen {
			o := results[s.name][r]
			fmt.Printf("| %d | %s | %.1f | %.1f | %.2f | %.1f | %.2f | %.1f |\n", r+1, s.label, o.playable, o.ready, o.playable/o.ready,
				o.workerCPU, o.workerCPU/o.ready, o.apiCPU)
		}
	}
	fmt.Println("\n| setup (median of the rounds) | playable, s | READY, s | playable / READY | worker CPU, s | cores busy |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range chosen {
		outs := results[s.name]
		fmt.Printf("| %s | %.1f | %.1f | %.2f | %.1f | %.2f |\n", s.label, stats.Median(field(outs, func(o outcome) float64 { return o.playable })),
			stats.Median(field(outs, func(o outcome) float64 { return o.ready })), stats.Median(field(outs, func(o outcome) float64 { return o.playable / o.ready })),
			stats.Median(field(outs, func(o outcome) float64 { return o.workerCPU })), stats.Median(field(outs, func(o outcome) float64 { return o.workerCPU / o.ready })))
	}
	fmt.Println("\nratios: the median of the rounds' ratios (each round's setups ran one after the other), then each round's")
	ratio := func(what string, per func(r int) float64) {
		var xs []string
		var vs []float64
		for r := range *rounds {
			vs = append(vs, per(r))
			xs = append(xs, fmt.Sprintf("%.2f", vs[r]))
		}
		fmt.Printf("  %-38s %.2f  (%s)\n", what, stats.Median(vs), strings.Join(xs, " "))
	}
	has := func(name string) bool { return len(results[name]) == *rounds }
	for _, name := range []string{"renditions-1", "renditions-2", "per-rung-2", "renditions-2-pinned", "renditions-1-pinned"} {
		if has(name) {
			ratio("playable / READY, "+label(name), func(r int) float64 { o := results[name][r]; return o.playable / o.ready })
		}
	}
	// Each group setup against the single job of its kind of machine.
	for _, against := range []struct {
		single string
		groups []string
	}{{"single", []string{"renditions-2", "renditions-1", "per-rung-2"}}, {"single-pinned", []string{"renditions-2-pinned", "renditions-1-pinned"}}} {
		if !has(against.single) {
			continue
		}
		for _, name := range against.groups {
			if has(name) {
				single := against.single
				ratio("READY "+label(name)+" / READY "+label(single), func(r int) float64 { return results[name][r].ready / results[single][r].ready })
				ratio("worker CPU "+label(name)+" / "+label(single), func(r int) float64 { return results[name][r].workerCPU / results[single][r].workerCPU })
			}
		}
	}
}

// label is the setup's letter, (a) to (g).
func label(name string) string {
	i := slices.IndexFunc(setups, func(s setup) bool { return s.name == name })
	return setups[i].label[:3]
}

func field(outs []outcome, f func(outcome) float64) []float64 {
	var xs []float64
	for _, o := range outs {
		xs = append(xs, f(o))
	}
	return xs
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	raw, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(raw)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
