package main

// End-to-end tests of the media pipeline: the real binary (built once by TestMain), real
// PostgreSQL, real ffmpeg, real HTTP over loopback. Uploads go through POST /v1/media; the
// jobs table is read directly to see claims. Timeouts only bound how long a test waits before
// giving up; no test asserts how fast anything is, the figures are logged.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

// Give-up bounds of the pipeline tests. None is an assertion about speed.
const (
	encodeTimeout = 90 * time.Second // an uploaded media reaches READY/FAILED, a job a state
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

// withDB returns env with DATABASE_URL set, so startServer joins that database.
func withDB(env map[string]string, dbURL string) map[string]string {
	env["DATABASE_URL"] = dbURL
	return env
}

func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// upload posts path as the multipart field "file" (named fileName) with a title and a
// visibility, expects 202 {"id","status":"PROCESSING"} and returns the id.
func (s *server) upload(t *testing.T, token, path, fileName, title, visibility string) int64 {
	t.Helper()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range [][2]string{{"title", title}, {"visibility", visibility}} {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := mw.CreateFormFile("file", fileName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.httpURL+"/v1/media", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/media (%d bytes): %v", len(content), err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/media: status %d, want 202; body %s", resp.StatusCode, out)
	}
	var got struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.ID <= 0 || got.Status != string(media.StatusProcessing) {
		t.Fatalf("POST /v1/media answered %s (%v), want a positive id and status PROCESSING", out, err)
	}
	return got.ID
}

// mediaView is GET /v1/media/{id} as the owner sees it.
type mediaView struct {
	Status        string `json:"status"`
	DurationMS    int64  `json:"duration_ms"`
	HLSURL        string `json:"hls_url"`
	ThumbnailURL  string `json:"thumbnail_url"`
	FailureReason string `json:"failure_reason"`
}

func (s *server) media(t *testing.T, token string, id int64) mediaView {
	t.Helper()
	out := s.mustDo(t, http.StatusOK, http.MethodGet, fmt.Sprintf("%s/v1/media/%d", s.httpURL, id), token, nil)
	var v mediaView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("GET /v1/media/%d: %s: %v", id, out, err)
	}
	return v
}

// putPosition reports a playback position and returns the status.
func (s *server) putPosition(t *testing.T, token string, id int64, posMS int) (int, []byte) {
	t.Helper()
	status, out, err := s.do(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", s.httpURL, id), token,
		map[string]any{"position_ms": posMS})
	if err != nil {
		t.Fatalf("PUT /v1/playback/%d: %v", id, err)
	}
	return status, out
}

// waitMedia polls GET /v1/media/{id} until its status is want, failing at once if it reaches
// the other terminal status, and after encodeTimeout.
func (s *server) waitMedia(t *testing.T, token string, id int64, want media.Status) mediaView {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		v := s.media(t, token, id)
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
}

func (j jobRow) String() string {
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	return fmt.Sprintf("job %d %s attempt %d/%d claimed_by %s claim_token %s lease_until %v last_error %q",
		j.ID, j.Status, j.AttemptCount, j.MaxAttempts, str(j.ClaimedBy), str(j.ClaimToken), j.LeaseUntil, str(j.LastError))
}

// mediaJob reads the one job of media id, failing unless there is exactly one.
func mediaJob(t *testing.T, pool *pgxpool.Pool, id int64) jobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `
		SELECT id, status, attempt_count, max_attempts, claim_token::text, claimed_by, lease_until, enqueued_at,
		       completed_at, last_error, available_at <= statement_timestamp()
		FROM jobs WHERE media_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatalf("read jobs of media %d: %v", id, err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[jobRow])
	if err != nil {
		t.Fatalf("read jobs of media %d: %v", id, err)
	}
	if len(jobs) != 1 {
		t.Fatalf("media %d has %d jobs, want exactly 1: %v", id, len(jobs), jobs)
	}
	return jobs[0]
}

// checkAlive fails the test if one of the processes a wait depends on has exited: nothing
// in the test stops them, so something outside did (or the process crashed).
func checkAlive(t *testing.T, what string, procs ...*server) {
	t.Helper()
	for _, p := range procs {
		select {
		case <-p.done:
			var who []string
			for _, kv := range p.cmd.Env {
				if strings.HasPrefix(kv, "PLAYHEAD_ROLE=") || strings.HasPrefix(kv, "PLAYHEAD_NODE_ID=") {
					who = append(who, kv)
				}
			}
			t.Fatalf("while waiting for %s, playhead pid %d (%s) exited unexpectedly (%v): nothing in the test stops it here; stderr:\n%s",
				what, p.cmd.Process.Pid, strings.Join(who, " "), p.waitErr, p.stderr)
		default:
		}
	}
}

// waitJob polls media id's job until cond holds. stop, when it returns true for a row, fails
// the test at once: the state waited for can no longer come; so does the exit of one of the
// processes in alive.
func waitJob(t *testing.T, pool *pgxpool.Pool, id int64, what string, cond, stop func(jobRow) bool, alive ...*server) jobRow {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		j := mediaJob(t, pool, id)
		checkAlive(t, "media "+strconv.FormatInt(id, 10)+"'s job to be "+what, alive...)
		switch {
		case cond(j):
			return j
		case stop != nil && stop(j):
			t.Fatalf("waiting for media %d's job to be %s, but it is now %v", id, what, j)
		case time.Now().After(deadline):
			t.Fatalf("media %d's job is not %s after %s: %v", id, what, encodeTimeout, j)
		}
		time.Sleep(pollEvery)
	}
}

func isDone(j jobRow) bool {
	return j.Status == string(encodejobs.StatusCompleted) || j.Status == string(encodejobs.StatusDead)
}

func claimedBy(node string) func(jobRow) bool {
	return func(j jobRow) bool {
		return j.Status == string(encodejobs.StatusProcessing) && j.ClaimedBy != nil && *j.ClaimedBy == node
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

// waitEncoding waits until a worker whose TMPDIR is tmpDir runs its HLS ffmpeg for media
// id's job: the encode is really in progress. It fails if the job leaves PROCESSING first.
func waitEncoding(t *testing.T, pool *pgxpool.Pool, id int64, node, tmpDir string, alive ...*server) {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		checkAlive(t, node+"'s HLS encode", alive...)
		for _, p := range encoderProcs(t, tmpDir) {
			if p.hls() {
				return
			}
		}
		if j := mediaJob(t, pool, id); !claimedBy(node)(j) {
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
func (s *server) fetch(t *testing.T, token, rawURL string) (int, []byte) {
	t.Helper()
	status, body, err := s.do(http.MethodGet, rawURL, token, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return status, body
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

// TestPipeline_UploadBecomesPlayable uploads a small video through a role=all process and
// follows it to a playable HLS stream: not playable while PROCESSING, then master playlist,
// segment and thumbnail served over HTTP from the winning claim's prefix, ffprobe-able, and
// the source never served.
func TestPipeline_UploadBecomesPlayable(t *testing.T) {
	storageDir, tmpDir := t.TempDir(), t.TempDir()
	s := startServer(t, pipelineEnv("all", "e2e-all", storageDir, tmpDir, "ultrafast"))
	pool := openPool(t, s.dbURL)
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 3, Width: 320, Height: 240, Audio: true})
	const ownerID, viewerID = 11, 12
	owner, viewer := mint(t, ownerID, false), mint(t, viewerID, false)

	id := s.upload(t, owner, src, "clip.mp4", "e2e clip", "PUBLIC")
	// Not playable before READY: the PUT goes first, and a PROCESSING status read after it
	// proves the media was not READY when the PUT was answered (status only moves forward).
	status, out := s.putPosition(t, owner, id, 1000)
	if v := s.media(t, owner, id); v.Status != string(media.StatusProcessing) {
		t.Fatalf("media %d is already %s right after its upload's 202 (failure_reason %q): "+
			"the not-playable-while-processing check could not be made", id, v.Status, v.FailureReason)
	}
	if status != http.StatusNotFound {
		t.Errorf("PUT /v1/playback/%d while PROCESSING by the owner: status %d %s, want 404", id, status, out)
	}
	// Keep checking while polling, counting only PUTs followed by a PROCESSING read.
	observed := 1
	deadline := time.Now().Add(encodeTimeout)
	var v mediaView
	for {
		putStatus, putBody := s.putPosition(t, viewer, id, 1000)
		v = s.media(t, owner, id)
		if v.Status != string(media.StatusProcessing) {
			break
		}
		observed++
		if putStatus != http.StatusNotFound {
			t.Fatalf("PUT /v1/playback/%d by another member while PROCESSING: status %d %s, want 404", id, putStatus, putBody)
		}
		if time.Now().After(deadline) {
			t.Fatalf("media %d still PROCESSING after %s", id, encodeTimeout)
		}
		time.Sleep(pollEvery)
	}
	if v.Status != string(media.StatusReady) {
		t.Fatalf("media %d ended %s (failure_reason %q), want READY; job: %v", id, v.Status, v.FailureReason, mediaJob(t, pool, id))
	}
	job := mediaJob(t, pool, id)
	if job.Status != string(encodejobs.StatusCompleted) || job.AttemptCount != 1 || job.CompletedAt == nil {
		t.Errorf("after READY: %v, want COMPLETED at attempt 1", job)
	}
	var encodeTook time.Duration
	if job.CompletedAt != nil {
		encodeTook = job.CompletedAt.Sub(job.EnqueuedAt)
	}
	t.Logf("3 s 320x240 upload: enqueued → COMPLETED in %s (ultrafast); %d PUTs answered 404 while PROCESSING",
		encodeTook.Round(time.Millisecond), observed)
	if v.DurationMS < 2500 || v.DurationMS > 3500 {
		t.Errorf("READY media has duration_ms %d, want about 3000", v.DurationMS)
	}

	// The outputs are under the completed claim's prefix, and nowhere else.
	token := str(job.ClaimToken)
	wantHLS := fmt.Sprintf("/objects/hls/%d/%s/master.m3u8", id, token)
	if token == "" || v.HLSURL != wantHLS {
		t.Errorf("hls_url %q, want %q (the completed claim's prefix)", v.HLSURL, wantHLS)
	}
	if wantThumb := fmt.Sprintf("/objects/hls/%d/%s/thumb.jpg", id, token); v.ThumbnailURL != wantThumb {
		t.Errorf("thumbnail_url %q, want %q", v.ThumbnailURL, wantThumb)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || dirs[0] != token {
		t.Errorf("storage hls/%d/ holds %v, want only the claim prefix %s", id, dirs, token)
	}
	claimDir := filepath.Join(storageDir, "hls", strconv.FormatInt(id, 10), token)
	for _, f := range []string{"master.m3u8", "thumb.jpg", "v0/index.m3u8", "v0/seg_000.ts"} {
		if fi, err := os.Stat(filepath.Join(claimDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("output %s under %s: %v (want a non-empty file)", f, claimDir, err)
		}
	}
	if left := scratchDirs(t, tmpDir); len(left) > 0 {
		t.Errorf("encode scratch directories left behind after READY: %v", left)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Playable now, by the owner and (PUBLIC) by anyone. The cache entry loaded while
	// PROCESSING is evicted by the READY notification, asynchronously: a few tries are allowed,
	// far fewer than the 60 s cache TTL would take.
	for _, who := range []struct {
		name  string
		token string
	}{{"the owner", owner}, {"another member", viewer}} {
		tries := 0
		giveUp := time.Now().Add(5 * time.Second)
		for {
			tries++
			status, out := s.putPosition(t, who.token, id, 1000)
			if status == http.StatusNoContent {
				if tries > 1 {
					t.Logf("PUT by %s after READY answered 204 at try %d", who.name, tries)
				}
				break
			}
			if status != http.StatusNotFound || time.Now().After(giveUp) {
				t.Errorf("PUT /v1/playback/%d by %s after READY: status %d %s after %d tries, want 204 "+
					"(is the media cache evicted when the media becomes READY?)", id, who.name, status, out, tries)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Served to members who may play it (now that the cache knows it is READY): master, a
	// variant playlist, a segment, the thumbnail.
	masterURL := s.httpURL + v.HLSURL
	if status, _ := s.fetch(t, "", masterURL); status != http.StatusUnauthorized {
		t.Errorf("GET %s without a token: status %d, want 401", masterURL, status)
	}
	status, master := s.fetch(t, owner, masterURL)
	if status != http.StatusOK || !bytes.HasPrefix(master, []byte("#EXTM3U")) || !bytes.Contains(master, []byte("#EXT-X-STREAM-INF")) {
		t.Fatalf("GET %s: status %d, body %q; want 200 and a master playlist", masterURL, status, master)
	}
	variantURL := firstURI(t, masterURL, master)
	status, variant := s.fetch(t, owner, variantURL)
	if status != http.StatusOK || !bytes.Contains(variant, []byte("#EXTINF")) {
		t.Fatalf("GET %s: status %d, body %q; want 200 and a media playlist", variantURL, status, variant)
	}
	segmentURL := firstURI(t, variantURL, variant)
	status, segment := s.fetch(t, viewer, segmentURL) // PUBLIC: any member may fetch it
	if status != http.StatusOK || len(segment) < 188 || segment[0] != 0x47 {
		t.Errorf("GET %s: status %d, %d bytes (first %x); want 200 and an MPEG-TS segment", segmentURL, status, len(segment), segment[:min(4, len(segment))])
	}
	status, thumb := s.fetch(t, owner, s.httpURL+v.ThumbnailURL)
	if ct := http.DetectContentType(thumb); status != http.StatusOK || ct != "image/jpeg" {
		t.Errorf("GET %s: status %d, %d bytes detected as %q; want 200 and a JPEG", v.ThumbnailURL, status, len(thumb), ct)
	}
	ctx, cancel := context.WithTimeout(context.Background(), encodeTimeout)
	defer cancel()
	probe := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-headers", "Authorization: Bearer "+owner+"\r\n", masterURL)
	if b, err := probe.CombinedOutput(); err != nil {
		t.Errorf("ffprobe -v error %s: %v\n%s", masterURL, err, b)
	}

	// The source exists in storage but is never served, directly or by climbing out of /hls.
	_, _, sourceKey := mediaRow(t, pool, id)
	source, err := os.ReadFile(filepath.Join(storageDir, filepath.FromSlash(sourceKey)))
	if err != nil || !strings.HasPrefix(sourceKey, "uploads/") {
		t.Fatalf("uploaded source %q should be in storage under uploads/: %v", sourceKey, err)
	}
	if status, body := s.fetch(t, owner, s.httpURL+"/objects/"+sourceKey); status != http.StatusNotFound {
		t.Errorf("GET /objects/%s: status %d (%d bytes), want 404: uploaded sources must never be public", sourceKey, status, len(body))
	}
	for _, p := range []string{"/objects/hls/../" + sourceKey, "/objects/hls/%2e%2e/" + sourceKey, "/objects/hls/..%2f" + sourceKey} {
		if status, body := s.fetch(t, owner, s.httpURL+p); status == http.StatusOK || bytes.Equal(body, source) {
			t.Errorf("GET %s: status %d (%d bytes): the uploaded source is reachable", p, status, len(body))
		}
	}
}

// TestPipeline_NonVideoUploadFails uploads a text file: the job fails permanently at its first
// attempt (no retries), the media is FAILED with a reason, the owner gets exactly one
// notification, and the process stays healthy. An admin retry runs it once more, with the
// same outcome.
func TestPipeline_NonVideoUploadFails(t *testing.T) {
	storageDir := t.TempDir()
	s := startServer(t, pipelineEnv("all", "e2e-all", storageDir, t.TempDir(), "ultrafast"))
	pool := openPool(t, s.dbURL)
	const ownerID = 21
	owner, admin := mint(t, ownerID, false), mint(t, 1, true)
	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte(strings.Repeat("These are meeting notes, not a video.\n", 50)), 0o644); err != nil {
		t.Fatal(err)
	}

	id := s.upload(t, owner, notes, "notes.txt", "", "PRIVATE")
	v := s.waitMedia(t, owner, id, media.StatusFailed)
	if v.FailureReason == "" || !strings.Contains(v.FailureReason, encoder.ErrNotVideo.Error()) {
		t.Errorf("failure_reason %q, want one saying %q", v.FailureReason, encoder.ErrNotVideo.Error())
	}
	if v.HLSURL != "" || v.ThumbnailURL != "" {
		t.Errorf("FAILED media shows hls_url %q thumbnail_url %q, want none", v.HLSURL, v.ThumbnailURL)
	}
	job := mediaJob(t, pool, id) // exactly one job
	if job.Status != string(encodejobs.StatusDead) || job.AttemptCount != 1 || job.CompletedAt == nil {
		t.Errorf("%v; want DEAD after exactly 1 attempt (a permanent error is not retried)", job)
	}
	if !strings.Contains(str(job.LastError), encoder.ErrNotVideo.Error()) {
		t.Errorf("job last_error %q, want the not-a-video reason", str(job.LastError))
	}

	// The admin API shows the same single DEAD job.
	var list struct {
		Jobs []encodejobs.Row `json:"jobs"`
	}
	out := s.mustDo(t, http.StatusOK, http.MethodGet, s.httpURL+"/v1/admin/jobs?status=DEAD", admin, nil)
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("GET /v1/admin/jobs?status=DEAD: %s: %v", out, err)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID || list.Jobs[0].MediaID != id || list.Jobs[0].AttemptCount != 1 {
		t.Errorf("GET /v1/admin/jobs?status=DEAD = %s, want exactly job %d of media %d at attempt 1", out, job.ID, id)
	}
	out = s.mustDo(t, http.StatusOK, http.MethodGet, s.httpURL+"/v1/admin/jobs", admin, nil)
	if err := json.Unmarshal(out, &list); err != nil || len(list.Jobs) != 1 {
		t.Errorf("GET /v1/admin/jobs = %s (%v), want exactly one job in the whole queue", out, err)
	}
	if n := outboxCount(t, pool, id, ""); n != 1 || outboxCount(t, pool, id, notify.OutboxMediaFailed) != 1 {
		t.Errorf("notification_outbox has %d rows for media %d, want exactly 1 of kind %s", n, id, notify.OutboxMediaFailed)
	}
	var member int64
	if err := pool.QueryRow(context.Background(), `SELECT member_id FROM notification_outbox WHERE media_id = $1`, id).Scan(&member); err != nil || member != ownerID {
		t.Errorf("the media_failed notification is for member %d (%v), want the owner %d", member, err, ownerID)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 0 {
		t.Errorf("a failed encode left outputs under hls/%d/: %v", id, dirs)
	}
	s.mustDo(t, http.StatusOK, http.MethodGet, s.metricsURL+"/readyz", "", nil)
	s.mustDo(t, http.StatusOK, http.MethodGet, s.httpURL+"/readyz", "", nil)

	// An admin retry gives the job fresh attempts: it runs again and dies again at attempt 1,
	// with a second notification.
	s.mustDo(t, http.StatusAccepted, http.MethodPost, fmt.Sprintf("%s/v1/admin/jobs/%d/retry", s.httpURL, job.ID), admin, nil)
	again := waitJob(t, pool, id, "DEAD again after the admin retry", func(j jobRow) bool {
		return j.Status == string(encodejobs.StatusDead) && outboxCount(t, pool, id, notify.OutboxMediaFailed) == 2
	}, func(j jobRow) bool { return j.Status == string(encodejobs.StatusCompleted) }, s)
	if again.AttemptCount != 1 || again.ID != job.ID {
		t.Errorf("after the admin retry: %v, want job %d DEAD at attempt 1", again, job.ID)
	}
	if v := s.media(t, owner, id); v.Status != string(media.StatusFailed) || v.FailureReason == "" {
		t.Errorf("after the admin retry the media is %s (failure_reason %q), want FAILED with a reason", v.Status, v.FailureReason)
	}
	s.mustDo(t, http.StatusNotFound, http.MethodPost, fmt.Sprintf("%s/v1/admin/jobs/%d/retry", s.httpURL, job.ID+1000), admin, nil)
	s.mustDo(t, http.StatusOK, http.MethodGet, s.metricsURL+"/readyz", "", nil)
}

// startPipeline starts a role=api process (uploads and reads, no encoder) on a fresh database,
// and returns it with a pool on its database and the shared storage directory.
func startPipeline(t *testing.T) (*server, *pgxpool.Pool, string) {
	t.Helper()
	storageDir := t.TempDir()
	api := startServer(t, pipelineEnv("api", "e2e-api", storageDir, t.TempDir(), "veryfast"))
	return api, openPool(t, api.dbURL), storageDir
}

// startWorker starts a role=worker process on api's database and storage directory, with its
// own TMPDIR, which it returns.
func startWorker(t *testing.T, api *server, storageDir, node string) (*server, string) {
	t.Helper()
	tmpDir := t.TempDir()
	w := startServer(t, withDB(pipelineEnv("worker", node, storageDir, tmpDir, "veryfast"), api.dbURL))
	return w, tmpDir
}

// TestPipeline_Kill9MidEncodeIsReclaimed kills the only worker with SIGKILL in the middle of
// an encode. Its lease runs out, a second worker reclaims the job (attempt 2) and completes
// it, and a completion under the dead worker's claim token is fenced out: ErrClaimLost, no
// write to the media row or the outbox (the "must show 2").
func TestPipeline_Kill9MidEncodeIsReclaimed(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startWorker(t, api, storageDir, "kill-a")
	if status, _, err := a.do(http.MethodGet, a.httpURL+"/healthz", "", nil); err == nil {
		t.Errorf("a role=worker process answered %d on the public address %s: it must open no public port", status, a.httpURL)
	}
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	owner := mint(t, 31, false)
	id := api.upload(t, owner, src, "slow.mp4", "e2e kill", "PUBLIC")

	first := waitJob(t, pool, id, "claimed by kill-a", claimedBy("kill-a"), isDone, api, a)
	claimedAt := time.Now()
	waitEncoding(t, pool, id, "kill-a", tmpA, api, a)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL worker A: %v", err)
	}
	a.wait(t, exitTimeout)
	killedAt := time.Now()
	// A died before finishing: its claim is still on the row, waiting for the lease to run out.
	atKill := mediaJob(t, pool, id)
	if !claimedBy("kill-a")(atKill) || str(atKill.ClaimToken) != str(first.ClaimToken) || atKill.AttemptCount != 1 {
		t.Fatalf("right after SIGKILL: %v, want still A's claim %s at attempt 1 (A was mid-encode)", atKill, str(first.ClaimToken))
	}
	// Nothing kills a SIGKILLed worker's ffmpeg: it runs on, orphaned, into A's scratch dir.
	// End those processes so they neither compete with B for the CPU nor outlive the test.
	orphans := encoderProcs(t, tmpA)
	for _, p := range orphans {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	t.Logf("SIGKILL of worker A %s after its claim was seen left %d ffmpeg process(es) of its encode running (killed by the test) "+
		"and %d scratch dir(s) in its TMPDIR", killedAt.Sub(claimedAt).Round(time.Millisecond), len(orphans), len(scratchDirs(t, tmpA)))

	b, _ := startWorker(t, api, storageDir, "kill-b")
	bReady := time.Now()
	second := waitJob(t, pool, id, "reclaimed by kill-b", claimedBy("kill-b"), isDone, api, b)
	reclaimedAt := time.Now()
	t.Logf("SIGKILL → reclaimed by worker B: %s (lease 3s; B was ready %s after the kill)",
		reclaimedAt.Sub(killedAt).Round(time.Millisecond), bReady.Sub(killedAt).Round(time.Millisecond))
	if second.AttemptCount != 2 || str(second.ClaimToken) == str(first.ClaimToken) {
		t.Errorf("reclaimed: %v, want attempt 2 under a new claim token (A's was %s)", second, str(first.ClaimToken))
	}

	q := encodejobs.NewQueue(pool, time.Minute)
	stale := encodejobs.Job{ID: first.ID, Kind: encodejobs.KindEncode, MediaID: id, ClaimToken: str(first.ClaimToken), Attempt: 1, MaxAttempts: 3}
	zombie := func(ranDomain *bool) encodejobs.DomainFunc {
		return func(ctx context.Context, tx pgx.Tx, owner int64) error {
			*ranDomain = true
			if err := media.MarkReady(ctx, tx, id, "hls/zombie/master.m3u8", "hls/zombie/thumb.jpg", 1); err != nil {
				return err
			}
			return notify.Outbox(ctx, tx, owner, id, notify.OutboxMediaReady, map[string]any{"zombie": true})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// While B holds the claim, A's token cannot complete the job.
	var ranWhileB bool
	if err := q.Complete(ctx, stale, zombie(&ranWhileB)); !errors.Is(err, encodejobs.ErrClaimLost) {
		t.Errorf("Complete with A's stale token while B holds the claim = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != "" {
		t.Errorf("after the fenced-out completion during B's claim the media is %s with hls_key %q, want PROCESSING and none", status, hlsKey)
	}
	if n := outboxCount(t, pool, id, ""); n != 0 {
		t.Errorf("after the fenced-out completion during B's claim the outbox has %d rows for the media, want 0", n)
	}
	if j := mediaJob(t, pool, id); isDone(j) || (j.Status == string(encodejobs.StatusProcessing) && str(j.ClaimToken) != str(second.ClaimToken)) {
		t.Errorf("after the fenced-out completion during B's claim: %v, want B's claim %s untouched", j, str(second.ClaimToken))
	}

	done := waitJob(t, pool, id, "COMPLETED", func(j jobRow) bool { return j.Status == string(encodejobs.StatusCompleted) },
		func(j jobRow) bool { return j.Status == string(encodejobs.StatusDead) }, api, b)
	if done.CompletedAt != nil {
		t.Logf("worker B: reclaimed → COMPLETED in about %s (10 s 720p, veryfast, 4 renditions); upload → READY %s overall",
			done.CompletedAt.Sub(reclaimedAt).Round(10*time.Millisecond), done.CompletedAt.Sub(done.EnqueuedAt).Round(10*time.Millisecond))
	}
	if done.AttemptCount != 2 || str(done.ClaimedBy) != "kill-b" || str(done.ClaimToken) != str(second.ClaimToken) {
		t.Errorf("completed: %v, want attempt 2 by kill-b under its claim %s", done, str(second.ClaimToken))
	}
	v := api.waitMedia(t, owner, id, media.StatusReady)
	wantPrefix := fmt.Sprintf("/objects/hls/%d/%s/", id, str(second.ClaimToken))
	if !strings.HasPrefix(v.HLSURL, wantPrefix) {
		t.Errorf("hls_url %q, want it under B's claim prefix %s", v.HLSURL, wantPrefix)
	}
	if status, _ := api.fetch(t, owner, api.httpURL+v.HLSURL); status != http.StatusOK {
		t.Errorf("GET %s: status %d, want 200", v.HLSURL, status)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 1 || dirs[0] != str(second.ClaimToken) {
		t.Errorf("storage hls/%d/ holds %v, want only B's claim prefix %s (A never stored outputs)", id, dirs, str(second.ClaimToken))
	}
	_, hlsBefore, _ := mediaRow(t, pool, id)
	if n := outboxCount(t, pool, id, notify.OutboxMediaReady); n != 1 {
		t.Errorf("outbox has %d media_ready rows for the media, want 1", n)
	}

	// After B completed, A's late completion is fenced out too and changes nothing.
	var ranAfter bool
	if err := q.Complete(ctx, stale, zombie(&ranAfter)); !errors.Is(err, encodejobs.ErrClaimLost) {
		t.Errorf("Complete with A's stale token after B completed = %v, want ErrClaimLost", err)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusReady) || hlsKey != hlsBefore {
		t.Errorf("after the late completion the media is %s with hls_key %q, want READY with %q unchanged", status, hlsKey, hlsBefore)
	}
	if n, ready := outboxCount(t, pool, id, ""), outboxCount(t, pool, id, notify.OutboxMediaReady); n != 1 || ready != 1 {
		t.Errorf("after the late completion the outbox has %d rows (%d media_ready) for the media, want exactly 1 media_ready", n, ready)
	}
	if j := mediaJob(t, pool, id); j.Status != string(encodejobs.StatusCompleted) || str(j.ClaimToken) != str(second.ClaimToken) || j.AttemptCount != 2 {
		t.Errorf("after the late completion: %v, want B's completed job unchanged", j)
	}
	t.Logf("stale-token completions: their domain writes ran inside the fenced transaction (during B's claim: %v, after B completed: %v)",
		ranWhileB, ranAfter)
	b.mustDo(t, http.StatusOK, http.MethodGet, b.metricsURL+"/readyz", "", nil)
}

// TestPipeline_SIGTERMReleasesForAnotherWorker stops the only worker with SIGTERM in the
// middle of an encode: it exits 0, the job is PENDING again with its attempt given back and no
// claim, before any other worker exists; a second worker then completes it at attempt 1 (the
// issue's "must show 3").
func TestPipeline_SIGTERMReleasesForAnotherWorker(t *testing.T) {
	api, pool, storageDir := startPipeline(t)
	a, tmpA := startWorker(t, api, storageDir, "term-a")
	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	owner := mint(t, 41, false)
	id := api.upload(t, owner, src, "slow.mp4", "e2e sigterm", "PRIVATE")

	waitJob(t, pool, id, "claimed by term-a", claimedBy("term-a"), isDone, api, a)
	waitEncoding(t, pool, id, "term-a", tmpA, api, a)
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM worker A: %v", err)
	}
	if code := a.wait(t, exitTimeout); code != 0 {
		t.Errorf("worker A exited with status %d after SIGTERM, want 0", code)
	}
	t.Logf("worker A exited %s after SIGTERM (mid-encode)", time.Since(signalled).Round(time.Millisecond))

	// Before any other worker exists: the claim was given back, attempt returned, due now.
	released := mediaJob(t, pool, id)
	if released.Status != string(encodejobs.StatusPending) || released.AttemptCount != 0 ||
		released.ClaimToken != nil || released.ClaimedBy != nil || released.LeaseUntil != nil || !released.Due {
		t.Fatalf("right after worker A's graceful exit: %v (due now: %v); want PENDING, attempt_count 0, no claim, due at once",
			released, released.Due)
	}
	if status, hlsKey, _ := mediaRow(t, pool, id); status != string(media.StatusProcessing) || hlsKey != "" {
		t.Errorf("after the release the media is %s with hls_key %q, want PROCESSING and none", status, hlsKey)
	}
	if n := outboxCount(t, pool, id, ""); n != 0 {
		t.Errorf("after the release the outbox has %d rows for the media, want 0 (a graceful stop is not a failure)", n)
	}
	if procs := encoderProcs(t, tmpA); len(procs) > 0 {
		t.Errorf("ffmpeg still running after worker A's graceful exit: %v", procs)
	}
	if left := scratchDirs(t, tmpA); len(left) > 0 {
		t.Errorf("worker A left encode scratch directories after its graceful exit: %v", left)
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 0 {
		t.Errorf("worker A left outputs under hls/%d/: %v", id, dirs)
	}

	started := time.Now()
	b, _ := startWorker(t, api, storageDir, "term-b")
	done := waitJob(t, pool, id, "COMPLETED", func(j jobRow) bool { return j.Status == string(encodejobs.StatusCompleted) },
		func(j jobRow) bool { return j.Status == string(encodejobs.StatusDead) }, api, b)
	t.Logf("worker B: start → job COMPLETED in %s (10 s 720p, veryfast, 4 renditions)", time.Since(started).Round(10*time.Millisecond))
	if done.AttemptCount != 1 || str(done.ClaimedBy) != "term-b" {
		t.Errorf("completed: %v, want attempt 1 (the released attempt reused) by term-b", done)
	}
	v := api.waitMedia(t, owner, id, media.StatusReady)
	if want := fmt.Sprintf("/objects/hls/%d/%s/master.m3u8", id, str(done.ClaimToken)); v.HLSURL != want {
		t.Errorf("hls_url %q, want %q", v.HLSURL, want)
	}
	// PRIVATE: its files are the owner's alone, like its playback.
	if status, _ := api.fetch(t, mint(t, 32, false), api.httpURL+v.HLSURL); status != http.StatusNotFound {
		t.Errorf("GET %s by another member: status %d, want 404 (private media)", v.HLSURL, status)
	}
	if status, _ := api.fetch(t, owner, api.httpURL+v.HLSURL); status != http.StatusOK {
		t.Errorf("GET %s by its owner: status %d, want 200", v.HLSURL, status)
	}
	if n := outboxCount(t, pool, id, notify.OutboxMediaReady); n != 1 {
		t.Errorf("outbox has %d media_ready rows for the media, want 1", n)
	}
	b.mustDo(t, http.StatusOK, http.MethodGet, b.metricsURL+"/readyz", "", nil)
}
