package main

// End-to-end security tests through the real binary (real ffmpeg, real PostgreSQL, real HTTP
// on loopback): path traversal, uploads that make the encoder read server files, huge frames
// and slow uploads, each attack done to the running server.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// rawGet sends "GET target HTTP/1.1" with target exactly as given — no client cleans or
// re-escapes it — and returns the status and body. A connection the server closes without an
// answer is status 0.
func rawGet(t *testing.T, s *binarytest.Server, target, token string) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.HTTPURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET " + target + " HTTP/1.1\r\nHost: playhead\r\nConnection: close\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// readyUpload uploads a small video as token's member and waits until it is READY; it returns
// the media id and the storage key prefix of its outputs (hls/{id}/{claim}/). Its picture is
// as wide as the title is long, in pairs of pixels past 160: two members' uploads in one test
// (titles of different lengths) never share an output byte for byte (the storyboard's sprites
// and the thumbnail of one picture would be the same files), so a test that looks for one
// member's bytes in answers to the other sees only real leaks.
func readyUpload(t *testing.T, s *binarytest.Server, token, title, visibility string) (int64, string) {
	t.Helper()
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 2, Width: 160 + 2*len(title), Height: 120})
	id := s.Upload(t, token, binarytest.Upload{Path: src, Title: title, Visibility: visibility})
	v := waitMedia(t, s, token, id, media.StatusReady)
	playlist, _, _ := strings.Cut(v.HLSURL, "?")
	if want := "/objects/" + media.AssembledMaster(id); playlist != want {
		t.Fatalf("hls_url %q, want the assembled master %s", v.HLSURL, want)
	}
	// A 120p source has one rendition, whose job wrote the thumbnail and the storyboard too.
	thumb, _, _ := strings.Cut(v.ThumbnailURL, "?")
	prefix := strings.TrimPrefix(strings.TrimSuffix(thumb, "thumb.jpg"), "/objects/")
	if !strings.HasPrefix(prefix, fmt.Sprintf("hls/%d/", id)) || strings.Count(prefix, "/") != 3 {
		t.Fatalf("thumbnail_url %q is not in a claim's folder of hls/%d/", v.ThumbnailURL, id)
	}
	return id, prefix
}

// bFiles are the files of a readyUpload's one rendition, under its claim's folder.
var bFiles = []string{"v0/index.m3u8", "v0/media.mp4", "thumb.jpg", "storyboard/storyboard.vtt", "storyboard/sprite_000.jpg"}

// TestSecurity_TraversalReachesNoOtherMedia is path traversal through the binary, with signed
// URLs: member A may play its own media; every way of writing a path from A's media into member
// B's private media, carrying the signature of A's own playlist URL, is refused (404, or 403:
// the signature is for another key) and never carries a byte of B's files.
func TestSecurity_TraversalReachesNoOtherMedia(t *testing.T) {
	storageDir := t.TempDir()
	s := binarytest.Start(t, pipelineEnv("all", "sec-traversal", storageDir, t.TempDir(), "ultrafast"))
	a, b := binarytest.Token(t, 101, false), binarytest.Token(t, 102, false)
	mine, minePrefix := readyUpload(t, s, a, "A's clip", "PRIVATE")
	theirs, theirsPrefix := readyUpload(t, s, b, "B's private clip", "PRIVATE")

	claimB := strings.TrimSuffix(strings.TrimPrefix(theirsPrefix, fmt.Sprintf("hls/%d/", theirs)), "/")
	claimA := strings.TrimSuffix(strings.TrimPrefix(minePrefix, fmt.Sprintf("hls/%d/", mine)), "/")
	// B's master playlist is assembled when served: whatever form it took, it would name the
	// folder of B's rendition.
	secrets := [][]byte{[]byte(claimB)}
	for _, f := range bFiles {
		content, err := os.ReadFile(filepath.Join(storageDir, filepath.FromSlash(theirsPrefix+f)))
		if err != nil {
			t.Fatalf("B's output %s: %v", f, err)
		}
		secrets = append(secrets, content)
	}
	m, y := strconv.FormatInt(mine, 10), strconv.FormatInt(theirs, 10)
	bKeys := []string{y + "/master.m3u8"} // under hls/
	for _, file := range bFiles {
		bKeys = append(bKeys, y+"/"+claimB+"/"+file)
	}
	var forms []string
	for _, k := range bKeys {
		forms = append(forms,
			"/objects/hls/"+k,
			"/objects/hls/"+m+"/../"+k,
			"/objects/hls/"+m+"/"+claimA+"/../../"+k,
			"/objects/hls/"+m+"/%2e%2e/"+k,
			"/objects/hls/"+m+"/%2E%2E/"+k,
			"/objects/hls/"+m+"/.%2e/"+k,
			"/objects/hls/"+m+"/..%2f"+k,
			"/objects/hls/"+m+"/..%2F"+strings.ReplaceAll(k, "/", "%2F"),
			"/objects/hls/"+m+"/./../"+k,
			"/objects/hls/"+m+"/x/../../"+k,
			"/objects/hls/"+m+"/%252e%252e/"+k,
			"/objects/hls/"+m+`/..\`+strings.ReplaceAll(k, "/", `\`),
			"/objects/hls/"+m+"/..%5c"+k,
			"/objects/hls/"+m+"/%00/../../"+k,
			"/objects/hls/"+m+"%00/../"+k,
			"/objects/hls/"+m+"//../"+k,
			"/objects/hls/0"+k,
		)
	}
	aURL := mediaOf(t, s, a, mine).HLSURL
	_, aQuery, _ := strings.Cut(aURL, "?")
	for _, form := range forms {
		target := form + "?" + aQuery
		status, body := rawGet(t, s, target, "")
		if status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("GET %s with A's signature: status %d, want 403 or 404", target, status)
		}
		for _, secret := range secrets {
			if len(body) > 0 && bytes.Contains(body, secret) {
				t.Errorf("GET %s as A: the answer carries B's file", target)
			}
		}
	}
	t.Logf("%d path forms from media %d into media %d: all refused", len(forms), mine, theirs)
	if status, _ := rawGet(t, s, aURL, ""); status != http.StatusOK {
		t.Errorf("A's own playlist: status %d, want 200", status)
	}
	if status, _ := rawGet(t, s, mediaOf(t, s, b, theirs).HLSURL, ""); status != http.StatusOK {
		t.Errorf("B's own playlist: status %d, want 200", status)
	}
}

// watchOpens reports, through the returned function, whether path was opened (by any process)
// since the call: inotify's IN_OPEN.
func watchOpens(t *testing.T, path string) func() bool {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN|syscall.IN_ACCESS); err != nil {
		t.Fatalf("inotify watch %s: %v", path, err)
	}
	return func() bool {
		buf := make([]byte, 64*syscall.SizeofInotifyEvent)
		n, err := syscall.Read(fd, buf)
		if err == syscall.EAGAIN {
			return false
		}
		if err != nil {
			t.Fatalf("inotify read: %v", err)
		}
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[0]))
		return n > 0 && ev.Mask&(syscall.IN_OPEN|syscall.IN_ACCESS) != 0
	}
}

// TestSecurity_PlaylistUploadNeverReadsServerFiles, through the binary: an upload named x.mp4
// whose content is an HLS playlist pointing at a video file on the server goes FAILED at its
// first attempt, never READY, and the server file is never opened.
func TestSecurity_PlaylistUploadNeverReadsServerFiles(t *testing.T) {
	storageDir := t.TempDir()
	s := binarytest.Start(t, pipelineEnv("all", "sec-playlist", storageDir, t.TempDir(), "ultrafast"))
	owner := binarytest.Token(t, 111, false)
	secret := filepath.Join(t.TempDir(), "server-file.ts")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25",
		"-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts", secret).CombinedOutput(); err != nil {
		t.Fatalf("generate: %v %s", err, out)
	}
	opened := watchOpens(t, secret)
	playlist := filepath.Join(t.TempDir(), "x.mp4")
	content := "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nfile://" + secret + "\n#EXT-X-ENDLIST\n"
	if err := os.WriteFile(playlist, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	id := s.Upload(t, owner, binarytest.Upload{Path: playlist, Title: "not a video", Visibility: "PUBLIC"})
	v := waitMedia(t, s, owner, id, media.StatusFailed) // fails the test at once if READY
	if !strings.HasPrefix(v.FailureReason, "not a playable video") || strings.Contains(v.FailureReason, "/") {
		t.Errorf("failure_reason %q, want a short not-a-video reason without paths", v.FailureReason)
	}
	job := mediaJob(t, s.Pool(t), id)
	if job.AttemptCount != 1 || job.Status != "DEAD" {
		t.Errorf("%v, want DEAD after one attempt", job)
	}
	if opened() {
		t.Error("the server file named in the playlist was opened")
	}
	if dirs := objectDirs(t, storageDir, id); len(dirs) != 0 {
		t.Errorf("outputs written for the playlist: %v", dirs)
	}
}

// TestSecurity_HugeFramesFail, through the binary: a small file of 8000×8000 frames goes FAILED
// with a reason saying so, at its first attempt, without an encode.
func TestSecurity_HugeFramesFail(t *testing.T) {
	storageDir, tmpDir := t.TempDir(), t.TempDir()
	s := binarytest.Start(t, pipelineEnv("all", "sec-huge", storageDir, tmpDir, "ultrafast"))
	owner := binarytest.Token(t, 121, false)
	huge := filepath.Join(t.TempDir(), "huge.mp4")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "color=c=black:s=8000x8000:r=1",
		"-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", huge).CombinedOutput(); err != nil {
		t.Fatalf("generate: %v %s", err, out)
	}
	fi, err := os.Stat(huge)
	if err != nil || fi.Size() > 1<<20 {
		t.Fatalf("the huge-frames file should be under 1 MiB: %v %v", fi, err)
	}
	id := s.Upload(t, owner, binarytest.Upload{Path: huge, Title: "huge frames", Visibility: "PRIVATE"})
	v := waitMedia(t, s, owner, id, media.StatusFailed)
	if want := "too large: the video is 8000×8000 pixels; the limit is 4096×4096"; v.FailureReason != want {
		t.Errorf("failure_reason %q, want %q", v.FailureReason, want)
	}
	if job := mediaJob(t, s.Pool(t), id); job.AttemptCount != 1 || job.Status != "DEAD" {
		t.Errorf("%v, want DEAD after one attempt", job)
	}
	t.Logf("a %d KiB file of 8000×8000 frames: FAILED, %q", fi.Size()>>10, v.FailureReason)
}

// waitUploadsInProgress waits until n uploads are being written to storage (their temporary
// files under uploads/).
func waitUploadsInProgress(t *testing.T, storageDir string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		files, err := filepath.Glob(filepath.Join(storageDir, "uploads", "*", ".put-*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d uploads in progress after 60 s, want %d", len(files), n)
		}
		time.Sleep(pollEvery)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestSecurity_SlowUploadsAreBounded: slow uploads through the binary. Without limits one
// member holds 300 uploads open by trickling bytes (the server's file descriptors went from 18
// to 616 when measured). A per-member limit applied only once fasthttp has read 8 KiB of a
// body is not enough: forty uploads that trickle a hundred bytes and then one byte a second
// all stay open until the read timeout cuts them, none refused.
//
// So the upload route is a first-byte route: of forty uploads by one member that send their
// body one byte a second from its first byte, PLAYHEAD_UPLOADS_PER_MEMBER run and the rest are
// answered 429; the node holds PLAYHEAD_UPLOADS_TOTAL; an upload that goes silent is cut after
// PLAYHEAD_UPLOAD_IDLE_TIMEOUT (408), freeing its slot. The test waits on the answers, however
// long they take; its timeouts only stop a hung server.
func TestSecurity_SlowUploadsAreBounded(t *testing.T) {
	const idle = 5 * time.Second // five ticks of the trickle: a trickling upload is never idle
	const perMember, attackers = 2, 40
	storageDir := t.TempDir()
	env := pipelineEnv("all", "sec-slow", storageDir, t.TempDir(), "ultrafast")
	env["PLAYHEAD_UPLOADS_PER_MEMBER"], env["PLAYHEAD_UPLOADS_TOTAL"] = strconv.Itoa(perMember), strconv.Itoa(perMember+1)
	env["PLAYHEAD_UPLOAD_IDLE_TIMEOUT"] = idle.String()
	s := binarytest.Start(t, env)
	pid := s.Cmd.Process.Pid
	a, b := binarytest.Token(t, 131, false), binarytest.Token(t, 132, false)
	fdsBefore := openFDs(t, pid)

	type answer struct {
		upload *binarytest.SlowUpload
		status int
	}
	answers := make(chan answer, attackers)
	var uploads []*binarytest.SlowUpload
	for range attackers {
		u := binarytest.StartSlowUpload(t, s.URL("/v1/media"), a, binarytest.FromFirstByte, time.Second)
		uploads = append(uploads, u)
		go func() { answers <- answer{u, <-u.Answer} }()
	}
	// All but the member's two are refused, each as soon as its body's first bytes arrive.
	refused := map[*binarytest.SlowUpload]bool{}
	for len(refused) < attackers-perMember {
		select {
		case got := <-answers:
			if got.status != http.StatusTooManyRequests {
				t.Fatalf("after %d uploads refused, a slow upload of the member was answered %d, want 429 (408: the read timeout cut it before the upload limits applied)",
					len(refused), got.status)
			}
			refused[got.upload] = true
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d of %d slow uploads by one member refused, want %d", len(refused), attackers, attackers-perMember)
		}
	}
	var held []*binarytest.SlowUpload
	for _, u := range uploads {
		if !refused[u] {
			held = append(held, u)
		}
	}
	select {
	case got := <-answers:
		t.Fatalf("one of the member's two running uploads was answered %d while still sending", got.status)
	default:
	}
	// The refused connections are closed by the server: descriptors stay bounded.
	fdsDuring := openFDs(t, pid)
	t.Logf("file descriptors: %d before, %d with %d slow uploads open by one member (%d running, %d refused)",
		fdsBefore, fdsDuring, attackers, len(held), len(refused))
	if fdsDuring > fdsBefore+20 {
		t.Errorf("the server holds %d file descriptors with %d slow uploads, %d before: refused uploads keep theirs", fdsDuring, attackers, fdsBefore)
	}
	// Another member gets the node's last slot; a fourth upload is refused by the node's total.
	// Its file is stored at once (its preamble is sent whole); A's two are still sending theirs
	// a byte a second, so it is the only upload in storage.
	other := binarytest.StartSlowUpload(t, s.URL("/v1/media"), b, binarytest.FromFile, time.Second)
	waitUploadsInProgress(t, storageDir, 1)
	fdsWithOther := openFDs(t, pid)
	status, out, err := s.PostMultipart(s.URL("/v1/media"), binarytest.Token(t, 133, false), nil, "c.mp4", strings.NewReader("small"))
	if err != nil || status != http.StatusTooManyRequests {
		t.Errorf("an upload while the node holds its total: %d %s (%v), want 429", status, out, err)
	}
	select {
	case status := <-other.Answer:
		t.Fatalf("member B's only upload was answered %d while it was still sending (%d fds)", status, fdsWithOther)
	default:
	}

	// Member A's uploads go silent: both are cut with 408, and A can upload again.
	for _, u := range held {
		u.Stop()
	}
	for range held {
		select {
		case got := <-answers:
			if !slices.Contains(held, got.upload) || got.status != http.StatusRequestTimeout {
				t.Errorf("a silent upload was answered %d, want 408", got.status)
			}
		case <-time.After(time.Minute):
			t.Fatal("a silent upload was not cut by the idle timeout")
		}
	}
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 1, Width: 160, Height: 120})
	s.Upload(t, a, binarytest.Upload{Path: src, Title: "after the cut"})
	other.Stop()
}
