package main

// What the pipeline tests (pipeline_*_e2e_test.go, chaos_jobs_test.go, ingest_e2e_test.go, the
// cluster tests) share: the environment of a pipeline process, the media and job views they
// poll (an encode group's in pipeline_group_test.go), and the worker's processes and files
// they inspect. The binary itself is run by internal/binarytest.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// Give-up bounds of the pipeline tests. None is an assertion about speed.
const (
	// An uploaded media reaches READY/FAILED, a job a state. slowSpec's encode took 43 s on
	// this 2-core machine at a load average of 20 (four test suites at once); 5 minutes leaves
	// room for worse without letting a stuck job hang the run.
	encodeTimeout = 5 * time.Minute
	pollEvery     = 50 * time.Millisecond
)

// slowSpec is a video whose encode with the veryfast preset (a 720p source gets four
// renditions) takes several seconds on a 2-core machine, so a worker can be stopped mid-encode.
// The tests fail with a clear message if the encode ever finishes before they stop it.
var slowSpec = testvideo.Spec{Seconds: 10, Width: 1280, Height: 720, Audio: true}

// pipelineEnv is the environment of one pipeline process: short lease and poll so a dead
// worker's job is reclaimed in seconds, its own TMPDIR (where the encode's scratch files and
// so its ffmpeg command lines live), and the shared storage directory.
func pipelineEnv(role, node, storageDir, tmpDir, preset string) map[string]string {
	return map[string]string{
		"PLAYHEAD_ROLE":              role,
		"PLAYHEAD_NODE_ID":           node,
		"PLAYHEAD_STORAGE_DIR":       storageDir,
		"PLAYHEAD_JOB_LEASE":         "3s",
		"PLAYHEAD_JOB_POLL_INTERVAL": "200ms",
		"PLAYHEAD_JOB_RETRY_BASE":    "200ms",
		"PLAYHEAD_ENCODE_PRESET":     preset,
		"TMPDIR":                     tmpDir,
		// The tests PUT far more often than a player (every poll while encoding); the limit
		// itself is tested in playback and in the reliability suite.
		"PLAYHEAD_PUT_RATE": "0",
	}
}

// mediaView is GET /v1/media/{id} as the owner sees it.
type mediaView struct {
	Status        string `json:"status"`
	DurationMS    int64  `json:"duration_ms"`
	HLSURL        string `json:"hls_url"`
	ThumbnailURL  string `json:"thumbnail_url"`
	StoryboardURL string `json:"storyboard_url"`
	FailureReason string `json:"failure_reason"`
	Playable      bool   `json:"playable"`
}

// mediaOf reads GET /v1/media/{id} as token's member.
func mediaOf(t *testing.T, s *binarytest.Server, token string, id int64) mediaView {
	t.Helper()
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/media/%d", id), token, nil)
	var v mediaView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("GET /v1/media/%d: %s: %v", id, out, err)
	}
	return v
}

// putPosition reports a playback position and returns the status.
func putPosition(t *testing.T, s *binarytest.Server, token string, id int64, posMS int) (int, []byte) {
	t.Helper()
	status, out, err := s.Do(http.MethodPut, s.URL("/v1/playback/%d", id), token,
		map[string]any{"position_ms": posMS})
	if err != nil {
		t.Fatalf("PUT /v1/playback/%d: %v", id, err)
	}
	return status, out
}

// waitMedia polls GET /v1/media/{id} until its status is want, failing at once if it reaches
// the other terminal status, and after encodeTimeout.
func waitMedia(t *testing.T, s *binarytest.Server, token string, id int64, want media.Status) mediaView {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		v := mediaOf(t, s, token, id)
		switch {
		case v.Status == string(want):
			return v
		case v.Status == string(media.StatusReady) || v.Status == string(media.StatusFailed):
			t.Fatalf("media %d is %s (failure_reason %q), want %s", id, v.Status, v.FailureReason, want)
		case time.Now().After(deadline):
			t.Fatalf("media %d still %s after %s, want %s", id, v.Status, encodeTimeout, want)
		}
		time.Sleep(pollEvery)
	}
}

// jobRow is a jobs row as the database holds it.
type jobRow struct {
	ID           int64
	Kind         string
	GroupID      *int64 // jobs.group_id: the id of the encode job of an encode group
	Args         *string
	Status       string
	AttemptCount int
	MaxAttempts  int
	ClaimToken   *string
	ClaimedBy    *string
	LeaseUntil   *time.Time
	EnqueuedAt   time.Time
	CompletedAt  *time.Time
	LastError    *string
	Due          bool // available_at <= now
	LostCount    int  // leases lost (worker killed, hung, cut off): they spend no attempt
}

func (j jobRow) String() string {
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	group := "none"
	if j.GroupID != nil {
		group = strconv.FormatInt(*j.GroupID, 10)
	}
	return fmt.Sprintf("job %d %s %s (group %s, args %s) attempt %d/%d lost leases %d claimed_by %s claim_token %s lease_until %v last_error %q",
		j.ID, j.Kind, j.Status, group, str(j.Args), j.AttemptCount, j.MaxAttempts, j.LostCount, str(j.ClaimedBy), str(j.ClaimToken), j.LeaseUntil, str(j.LastError))
}

// mediaJob reads the one job of media id, failing unless there is exactly one: a media
// encoded with PLAYHEAD_ENCODE_MODE=single, or an upload whose encode ended at its probe. An
// encode group's jobs are mediaJobs'.
func mediaJob(t *testing.T, pool *pgxpool.Pool, id int64) jobRow {
	t.Helper()
	jobs := readJobs(t, pool, id, nil)
	if len(jobs) != 1 {
		t.Fatalf("media %d has %d jobs, want exactly 1: %v", id, len(jobs), jobs)
	}
	return jobs[0]
}

// readJobs reads the jobs of media id, in id order: those of kinds, or every one when kinds
// is nil.
func readJobs(t *testing.T, pool *pgxpool.Pool, id int64, kinds []string) []jobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `
		SELECT id, kind, group_id, args::text, status, attempt_count, max_attempts, claim_token::text, claimed_by, lease_until,
		       enqueued_at, completed_at, last_error, available_at <= statement_timestamp(), lost_count
		FROM jobs WHERE subject_id = $1 AND ($2::text[] IS NULL OR kind = ANY($2)) ORDER BY id`, id, kinds)
	if err != nil {
		t.Fatalf("read jobs of media %d: %v", id, err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[jobRow])
	if err != nil {
		t.Fatalf("read jobs of media %d: %v", id, err)
	}
	return jobs
}

// checkAlive fails the test if one of the processes a wait depends on has exited: nothing
// in the test stops them, so something outside did (or the process crashed).
func checkAlive(t *testing.T, what string, procs ...*binarytest.Server) {
	t.Helper()
	for _, p := range procs {
		if exited, err := p.Exited(); exited {
			var who []string
			for _, kv := range p.Cmd.Env {
				if strings.HasPrefix(kv, "PLAYHEAD_ROLE=") || strings.HasPrefix(kv, "PLAYHEAD_NODE_ID=") {
					who = append(who, kv)
				}
			}
			t.Fatalf("while waiting for %s, playhead pid %d (%s) exited unexpectedly (%v): nothing in the test stops it here; stderr:\n%s",
				what, p.Cmd.Process.Pid, strings.Join(who, " "), err, p.Stderr)
		}
	}
}

// waitJob polls media id's job until cond holds. stop, when it returns true for a row, fails
// the test at once: the state waited for can no longer come; so does the exit of one of the
// processes in alive.
func waitJob(t *testing.T, pool *pgxpool.Pool, id int64, what string, cond, stop func(jobRow) bool, alive ...*binarytest.Server) jobRow {
	t.Helper()
	return waitState(t, fmt.Sprintf("media %d's job", id), what, func() jobRow { return mediaJob(t, pool, id) }, cond, stop, alive...)
}

// waitState reads subject (named for the messages, "media 7's job") until cond holds of what
// read returns, and returns that. stop, when it holds, fails the test at once (the state
// waited for can no longer come), as do the exit of one of the processes in alive and
// encodeTimeout passing.
func waitState[T any](t *testing.T, subject, what string, read func() T, cond, stop func(T) bool, alive ...*binarytest.Server) T {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		v := read()
		checkAlive(t, subject+" to be "+what, alive...)
		switch {
		case cond(v):
			return v
		case stop != nil && stop(v):
			t.Fatalf("waiting for %s to be %s, but it is now %v", subject, what, v)
		case time.Now().After(deadline):
			t.Fatalf("%s is not %s after %s: %v", subject, what, encodeTimeout, v)
		}
		time.Sleep(pollEvery)
	}
}

func isDone(j jobRow) bool {
	return j.Status == string(jobqueue.StatusCompleted) || j.Status == string(jobqueue.StatusDead)
}

func claimedBy(node string) func(jobRow) bool {
	return func(j jobRow) bool {
		return j.Status == string(jobqueue.StatusProcessing) && j.ClaimedBy != nil && *j.ClaimedBy == node
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// outboxCount counts media id's notification_outbox rows of kind ("" for every kind).
func outboxCount(t *testing.T, pool *pgxpool.Pool, id int64, kind string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM notification_outbox WHERE media_id = $1 AND ($2 = '' OR kind = $2)`, id, kind).Scan(&n)
	if err != nil {
		t.Fatalf("count outbox rows: %v", err)
	}
	return n
}

// mediaRow reads the media columns the API does not show.
func mediaRow(t *testing.T, pool *pgxpool.Pool, id int64) (status, hlsKey, sourceKey string) {
	t.Helper()
	var hls, source *string
	err := pool.QueryRow(context.Background(), `SELECT status, hls_key, source_key FROM media WHERE id = $1`, id).
		Scan(&status, &hls, &source)
	if err != nil {
		t.Fatalf("read media %d: %v", id, err)
	}
	return status, str(hls), str(source)
}

// encoderProc is an ffmpeg or ffprobe process.
type encoderProc struct {
	pid  int
	args []string
}

func (p encoderProc) hls() bool {
	for i, a := range p.args {
		if a == "-f" && i+1 < len(p.args) && p.args[i+1] == "hls" {
			return true
		}
	}
	return false
}

// encoderProcs lists the live ffmpeg/ffprobe processes whose command line mentions dir — a
// worker's TMPDIR, under which its encodes' scratch files are. Linux only (/proc).
func encoderProcs(t *testing.T, dir string) []encoderProc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("list processes: %v", err)
	}
	var out []encoderProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 { // gone, or a zombie
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "ff") || !strings.Contains(string(raw), dir) {
			continue
		}
		out = append(out, encoderProc{pid: pid, args: args})
	}
	return out
}

// waitEncoding waits until a worker whose TMPDIR is tmpDir runs its HLS ffmpeg for job jobID
// of media id (a rendition of its encode group, which node has claimed): the encode is really
// in progress. A worker runs one rendition at a time (PLAYHEAD_ENCODE_CONCURRENCY 1), and the
// group's other jobs run no HLS ffmpeg, so the one seen is that job's. It fails if the job
// leaves node's claim first.
func waitEncoding(t *testing.T, pool *pgxpool.Pool, id, jobID int64, node, tmpDir string, alive ...*binarytest.Server) {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		checkAlive(t, node+"'s HLS encode", alive...)
		for _, p := range encoderProcs(t, tmpDir) {
			if p.hls() {
				return
			}
		}
		if j := groupOf(mediaJobs(t, pool, id)).job(t, jobID); !claimedBy(node)(j) {
			t.Fatalf("%s's HLS encode was never seen running, and the job is no longer its claim: %v "+
				"(if it completed, the test video is too small to stop the worker mid-encode)", node, j)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not started its HLS ffmpeg after %s", node, encodeTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scratchDirs lists the encode scratch directories left in a worker's TMPDIR.
func scratchDirs(t *testing.T, tmpDir string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(tmpDir, "playhead-encode-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// objectDirs lists the claim prefixes (hls/<id>/<token>) that hold outputs of media id.
func objectDirs(t *testing.T, storageDir string, id int64) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// fetch GETs a URL with token (none when empty) and returns the status and body.
func fetch(t *testing.T, s *binarytest.Server, token, rawURL string) (int, []byte) {
	t.Helper()
	status, body, err := s.Do(http.MethodGet, rawURL, token, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return status, body
}

// fetchRange GETs bytes first…last of rawURL without a token.
func fetchRange(t *testing.T, rawURL string, first, last int64) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", first, last))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s (range): %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// firstByteRange returns the first EXT-X-BYTERANGE of a media playlist as first and last byte.
func firstByteRange(t *testing.T, playlist []byte) (first, last int64) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^#EXT-X-BYTERANGE:(\d+)@(\d+)$`).FindSubmatch(playlist)
	if m == nil {
		t.Fatalf("the media playlist has no EXT-X-BYTERANGE:\n%s", playlist)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	first, _ = strconv.ParseInt(string(m[2]), 10, 64)
	return first, first + n - 1
}

// firstURI returns the first non-comment line of an m3u8 playlist, resolved against base.
func firstURI(t *testing.T, base string, playlist []byte) string {
	t.Helper()
	for line := range strings.Lines(string(playlist)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := url.Parse(line)
		if err != nil {
			t.Fatalf("playlist %s has a bad URI %q: %v", base, line, err)
		}
		return b.ResolveReference(ref).String()
	}
	t.Fatalf("playlist %s lists no URI:\n%s", base, playlist)
	return ""
}

// startPipeline starts a role=api process (uploads and reads, no encoder) on a fresh database,
// and returns it with a pool on its database and the shared storage directory.
func startPipeline(t *testing.T) (*binarytest.Server, *pgxpool.Pool, string) {
	t.Helper()
	storageDir := t.TempDir()
	api := binarytest.Start(t, pipelineEnv("api", "e2e-api", storageDir, t.TempDir(), "veryfast"))
	return api, api.Pool(t), storageDir
}

// startWorker starts a role=worker process on api's database and storage directory, with its
// own TMPDIR, which it returns.
func startWorker(t *testing.T, api *binarytest.Server, storageDir, node string) (*binarytest.Server, string) {
	t.Helper()
	return startTunedWorker(t, api, storageDir, node, nil)
}

// startTunedWorker is startWorker with tune (when not nil) changing the worker's environment.
func startTunedWorker(t *testing.T, api *binarytest.Server, storageDir, node string, tune func(env map[string]string)) (*binarytest.Server, string) {
	t.Helper()
	tmpDir := t.TempDir()
	env := pipelineEnv("worker", node, storageDir, tmpDir, "veryfast")
	env["DATABASE_URL"] = api.DBURL // join the API's database
	if tune != nil {
		tune(env)
	}
	w := binarytest.Start(t, env)
	return w, tmpDir
}
