package main

// Playhead on S3 storage, through the real binary: API and worker nodes that share nothing but
// the database and a bucket of a real S3 server (SeaweedFS, internal/s3test), players that
// fetch segments straight from the bucket with presigned URLs, and what a killed worker leaves
// behind. Every wait here waits on the thing it needs, bounded by a deadline.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// s3SigningSecret is the URL signing secret of the S3 tests' nodes: a value the tests look for
// in every log line and metric, where it must never appear.
const s3SigningSecret = "s3-e2e-url-signing-secret-0123456789-abcdef"

// s3NodeEnv is pipelineEnv for a node on S3 storage: a local storage directory and TMPDIR of
// its own (which must stay empty of objects), the bucket, and the signing secret.
func s3NodeEnv(t *testing.T, role, node string, srv *s3test.Server, bucket string) map[string]string {
	t.Helper()
	env := pipelineEnv(role, node, t.TempDir(), t.TempDir(), "ultrafast")
	maps.Copy(env, srv.Env(bucket))
	env["PLAYHEAD_URL_SIGNING_SECRET"] = s3SigningSecret
	env["PLAYHEAD_LOG_LEVEL"] = "debug" // the secrets must stay out of even the most verbose log
	return env
}

// plainGet fetches rawURL with no header at all: no cookie, no token.
func plainGet(t *testing.T, rawURL string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return resp.StatusCode, body
}

// filesUnder lists the regular files under dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// presignedExpiry reads when an S3 presigned URL expires: X-Amz-Date plus X-Amz-Expires.
func presignedExpiry(t *testing.T, rawURL string) time.Time {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	date, err := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
	secs, err2 := strconv.Atoi(u.Query().Get("X-Amz-Expires"))
	if err != nil || err2 != nil {
		t.Fatalf("%s is not a presigned URL: %v %v", rawURL, err, err2)
	}
	return date.Add(time.Duration(secs) * time.Second)
}

// playheadExpiry reads when a Playhead signed URL expires (its expires parameter).
func playheadExpiry(t *testing.T, rawURL string) time.Time {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseInt(u.Query().Get("expires"), 10, 64)
	if err != nil {
		t.Fatalf("%s has no expires parameter", rawURL)
	}
	return time.Unix(secs, 0)
}

// waitPast sleeps until the wall clock is past at: what an expiry test waits on.
func waitPast(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d + 100*time.Millisecond)
	}
}

// segmentURIs returns the URIs of a playlist, resolved against base.
func segmentURIs(t *testing.T, base string, playlist []byte) []string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(playlist)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ref, err := url.Parse(line)
		if err != nil {
			t.Fatalf("playlist %s has a bad URI %q: %v", base, line, err)
		}
		out = append(out, b.ResolveReference(ref).String())
	}
	return out
}

// TestS3_UploadOnOneNodeEncodeOnAWorkerPlayOnAnother: two API nodes and one worker, each with a
// local directory of its own, and one bucket. An upload through node A is encoded by the worker
// and played through node B: ffprobe reads the master playlist and the segments through the
// signed URLs, with no cookie or token, the segments straight from the bucket. Then the signed
// URLs' promises: a segment's URL opens nothing else, an expired URL is refused, a member
// without access gets no playlist, and neither the signing secret nor the S3 secret key is in
// any node's log or metrics. The worker encodes in PLAYHEAD_ENCODE_MODE=single, whose one job
// writes the whole layout this test reads under one claim's prefix; an encode group writes the
// same files a rendition to a claim folder, through the same store
// (TestPlayer_UploadWatchLeaveResumeInChromium/s3 plays one from the bucket).
func TestS3_UploadOnOneNodeEncodeOnAWorkerPlayOnAnother(t *testing.T) {
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	envA := s3NodeEnv(t, "api", "s3-api-a", srv, bucket)
	a := binarytest.Start(t, envA)
	envB := s3NodeEnv(t, "api", "s3-api-b", srv, bucket)
	envB["DATABASE_URL"] = a.DBURL
	b := binarytest.Start(t, envB)
	envW := s3NodeEnv(t, "worker", "s3-worker", srv, bucket)
	envW["DATABASE_URL"] = a.DBURL
	envW["PLAYHEAD_ENCODE_MODE"] = "single"
	w := binarytest.Start(t, envW)
	// Node C serves links that live 3 s past the playback distance, for the expiry checks.
	envC := s3NodeEnv(t, "api", "s3-api-c", srv, bucket)
	envC["DATABASE_URL"] = a.DBURL
	envC["PLAYHEAD_SIGNED_URL_TTL"] = "3s"
	c := binarytest.Start(t, envC)
	nodes := map[string]*binarytest.Server{"A": a, "B": b, "worker": w, "C": c}

	const ownerID, viewerID = 61, 62
	owner, viewer, admin := binarytest.Token(t, ownerID, false), binarytest.Token(t, viewerID, false), binarytest.Token(t, 1, true)
	// 9 s: two segments of 6 s or less.
	src := testvideo.MP4(t, t.TempDir(), testvideo.Spec{Seconds: 9, Width: 320, Height: 240, Audio: true})
	id := a.Upload(t, owner, binarytest.Upload{Path: src, Title: "s3 clip", Visibility: "PUBLIC"})
	v := waitMedia(t, b, owner, id, media.StatusReady)
	_, hlsKey, sourceKey := mediaRow(t, a.Pool(t), id)
	claimPrefix := strings.TrimSuffix(hlsKey, "master.m3u8")

	// The bucket holds the source and the outputs; no node's own directories hold a file.
	keys := srv.Keys(t, bucket)
	for _, want := range []string{sourceKey, hlsKey, claimPrefix + "v0/index.m3u8", claimPrefix + "v0/media.mp4", claimPrefix + "audio/media.mp4",
		claimPrefix + "thumb.jpg", claimPrefix + "storyboard/storyboard.vtt", claimPrefix + "storyboard/sprite_000.jpg"} {
		if !slices.Contains(keys, want) {
			t.Errorf("the bucket lacks %s (it holds %q)", want, keys)
		}
	}
	for name, env := range map[string]map[string]string{"A": envA, "B": envB, "worker": envW, "C": envC} {
		for _, dir := range []string{env["PLAYHEAD_STORAGE_DIR"], env["TMPDIR"]} {
			if files := filesUnder(t, dir); len(files) > 0 {
				t.Errorf("node %s's own directory %s holds %q: nodes must share nothing but the bucket", name, dir, files)
			}
		}
	}

	// ffprobe through node B's signed URL: master and variant playlists from B, segments from
	// the bucket; no cookie, no token.
	masterURL := b.HTTPURL + v.HLSURL
	ctx, cancel := context.WithTimeout(context.Background(), encodeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", masterURL).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "video") || !strings.Contains(string(out), "audio") {
		t.Fatalf("ffprobe %s: %v\n%s\nwant a video and an audio stream", masterURL, err, out)
	}
	status, master := plainGet(t, masterURL)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", masterURL, status, master)
	}
	variantURL := segmentURIs(t, masterURL, master)[0]
	if !strings.HasPrefix(variantURL, b.HTTPURL+"/objects/"+claimPrefix) {
		t.Errorf("the master playlist's variant URL %s is not node B's own signed URL", variantURL)
	}
	status, variant := plainGet(t, variantURL)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", variantURL, status, variant)
	}
	segments := segmentURIs(t, variantURL, variant)
	bucketURL := srv.Endpoint + "/" + bucket + "/"
	if len(segments) < 2 || !strings.HasPrefix(segments[0], bucketURL+claimPrefix+"v0/media.mp4?") {
		t.Fatalf("variant playlist's segments %q: want at least two presigned URLs of the bucket (%s…)", segments, bucketURL)
	}
	// The first segment is a byte range of the rendition's fMP4 file: S3 serves the range.
	first, last := firstByteRange(t, variant)
	status, _, seg := fetchRange(t, segments[0], first, last)
	if box := string(seg[4:min(8, len(seg))]); status != http.StatusPartialContent || int64(len(seg)) != last-first+1 || (box != "sidx" && box != "moof") {
		t.Fatalf("GET the presigned segment %s bytes %d-%d: %d, %d bytes (box %q); want 206 and an fMP4 segment", segments[0], first, last, status, len(seg), box)
	}
	if status, body := plainGet(t, bucketURL+claimPrefix+"v0/media.mp4"); status != http.StatusForbidden {
		t.Errorf("GET the segment from the bucket without a signature: %d %.200s, want 403", status, body)
	}
	if !strings.HasPrefix(v.ThumbnailURL, bucketURL+claimPrefix+"thumb.jpg?") {
		t.Errorf("thumbnail_url %s, want a presigned URL of the bucket", v.ThumbnailURL)
	} else if status, thumb := plainGet(t, v.ThumbnailURL); status != http.StatusOK || http.DetectContentType(thumb) != "image/jpeg" {
		t.Errorf("GET the presigned thumbnail: %d, %q", status, http.DetectContentType(thumb))
	}

	// One segment's URL opens nothing else: its query on the next segment, the uploaded
	// source, another media's path; a Playhead link's query on another file.
	_, segQuery, _ := strings.Cut(segments[0], "?")
	for _, other := range []string{claimPrefix + "audio/media.mp4", sourceKey, fmt.Sprintf("hls/%d/%s", id+1, strings.TrimPrefix(claimPrefix, fmt.Sprintf("hls/%d/", id)))} {
		if status, body := plainGet(t, bucketURL+other+"?"+segQuery); status != http.StatusForbidden {
			t.Errorf("segment 0's signature on %s: %d %.200s, want 403", other, status, body)
		}
	}
	_, variantQuery, _ := strings.Cut(variantURL, "?")
	for _, other := range []string{hlsKey, claimPrefix + "thumb.jpg", sourceKey} {
		if status, body := plainGet(t, b.HTTPURL+"/objects/"+other+"?"+variantQuery); status != http.StatusForbidden && status != http.StatusNotFound {
			t.Errorf("the variant playlist's signature on /objects/%s: %d %.200s, want 403 or 404", other, status, body)
		}
	}

	// Expired links are refused: node C's live 3 s past their playback distance. The same
	// URLs work before.
	cv := mediaOf(t, c, owner, id)
	cMaster := c.HTTPURL + cv.HLSURL
	status, cMasterBody := plainGet(t, cMaster)
	cVariant := segmentURIs(t, cMaster, cMasterBody)[0]
	status2, cVariantBody := plainGet(t, cVariant)
	cSegment := segmentURIs(t, cVariant, cVariantBody)[0]
	status3, _ := plainGet(t, cSegment)
	if status != http.StatusOK || status2 != http.StatusOK || status3 != http.StatusOK {
		t.Fatalf("node C's fresh links: master %d, variant %d, segment %d; want 200", status, status2, status3)
	}
	waitPast(presignedExpiry(t, cSegment))
	if status, body := plainGet(t, cSegment); status != http.StatusForbidden {
		t.Errorf("an expired presigned segment URL: %d %.200s, want 403", status, body)
	}
	waitPast(playheadExpiry(t, cMaster))
	if status, body := plainGet(t, cMaster); status != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("an expired playlist URL: %d %s, want 403 saying it expired", status, body)
	}

	// A member without access gets no playlist: the viewer plays the PUBLIC media, then an
	// admin makes it PRIVATE. The viewer's GET /v1/media is refused at once (it reads the row),
	// and the playlist link it was given as soon as the change's notification has reached node
	// B's media cache (milliseconds; the wait is bounded at 10 s).
	viewerURL := b.HTTPURL + mediaOf(t, b, viewer, id).HLSURL
	if status, _ := plainGet(t, viewerURL); status != http.StatusOK {
		t.Fatalf("the viewer's playlist link while PUBLIC: %d, want 200", status)
	}
	a.MustDo(t, http.StatusOK, http.MethodPatch, a.URL("/v1/admin/media/%d", id), admin, map[string]any{"visibility": "PRIVATE"})
	if status, _ := fetch(t, b, viewer, b.URL("/v1/media/%d", id)); status != http.StatusNotFound {
		t.Errorf("GET /v1/media/%d by a member without access after it became PRIVATE: %d, want 404", id, status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := plainGet(t, viewerURL)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the viewer's playlist link 10 s after the media became PRIVATE: %d %.200s, want 404", status, body)
		}
		time.Sleep(pollEvery)
	}
	if status, _ := plainGet(t, b.HTTPURL+mediaOf(t, b, owner, id).HLSURL); status != http.StatusOK {
		t.Errorf("the owner's playlist link of the PRIVATE media: %d, want 200", status)
	}

	// The secrets are in no log and no metric of any node.
	for name, n := range nodes {
		metrics := n.Metrics(t)
		for what, secret := range map[string]string{"the URL signing secret": s3SigningSecret, "the S3 secret key": srv.SecretAccessKey} {
			for where, text := range map[string]string{"stdout": n.Stdout.String(), "stderr": n.Stderr.String(), "metrics": metrics} {
				if strings.Contains(text, secret) {
					t.Errorf("node %s's %s contains %s", name, where, what)
				}
			}
		}
		if n.Stderr.String() == "" && n.Stdout.String() == "" {
			t.Errorf("node %s logged nothing: the secret check would prove nothing", name)
		}
	}
}

// TestS3_StartUpSaysWhatIsWrong: a missing bucket and wrong credentials stop a node at start-up
// with an error that says which, and never quotes the secret key.
func TestS3_StartUpSaysWhatIsWrong(t *testing.T) {
	srv, bucket := s3test.Shared(t), s3test.Bucket(t)
	dbURL := pgtest.URL(t)
	for _, tc := range []struct {
		name, want string
		change     func(env map[string]string)
	}{
		{"missing bucket", `bucket "no-such-bucket" does not exist`, func(env map[string]string) { env["PLAYHEAD_S3_BUCKET"] = "no-such-bucket" }},
		{"wrong secret", "cannot reach bucket", func(env map[string]string) { env["PLAYHEAD_S3_SECRET_ACCESS_KEY"] = "wrong-" + srv.SecretAccessKey }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := s3NodeEnv(t, "all", "s3-bad", srv, bucket)
			env["PLAYHEAD_JWT_SECRET"] = binarytest.Secret
			env["DATABASE_URL"] = dbURL
			env["PLAYHEAD_HTTP_ADDR"], env["PLAYHEAD_METRICS_ADDR"] = binarytest.FreeAddr(t), binarytest.FreeAddr(t)
			tc.change(env)
			p := binarytest.Run(t, env, "serve")
			if code := p.Wait(t, binarytest.ExitTimeout); code == 0 {
				t.Fatalf("serve with a %s exited 0", tc.name)
			}
			stderr := p.Stderr.String()
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", stderr, tc.want)
			}
			if strings.Contains(stderr, srv.SecretAccessKey) || strings.Contains(p.Stdout.String(), srv.SecretAccessKey) {
				t.Errorf("the output quotes the S3 secret key: %s", stderr)
			}
		})
	}
}
