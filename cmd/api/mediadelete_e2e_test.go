package main

// A media deleted while its encode runs on two workers, on local storage and on S3: what the
// deletion leaves (nothing), who is told (a webhook, once, signed), and what its old links do.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/ingest"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/mediadelete"
	"github.com/playhead/playhead/storage"
)

// deletionSigningSecret signs the links of the local-storage run, so that the test can sign a
// thumbnail link as a node would (a media still encoding shows none).
const deletionSigningSecret = "deletion-e2e-url-signing-secret-0123456789"

// TestMediaDeletion_DuringEncodingLeavesNothing: an upload's encode group runs on two workers
// (three rendition jobs: the lowest, which makes it playable, then two at once, one per worker)
// when its owner deletes it. After its deletion job and an orphan sweep pass, a listing of every
// key of the store finds none of its objects (source, renditions under every claim, thumbnail,
// storyboard, I-frame playlists), no job of its encode is left, the media.deleted event was
// delivered once to the webhook registered for it, with a signature that the Standard Webhooks
// library (npm standardwebhooks) verifies, and its old signed links (master and variant
// playlists, a segment, the thumbnail) answer 404. On local storage and on S3.
func TestMediaDeletion_DuringEncodingLeavesNothing(t *testing.T) {
	t.Run("Local", func(t *testing.T) {
		dir := t.TempDir()
		st, err := storage.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		deleteDuringEncoding(t, st, nil, deletionSigningSecret, func(role, node string) map[string]string {
			env := pipelineEnv(role, node, dir, t.TempDir(), "veryfast")
			env["PLAYHEAD_URL_SIGNING_SECRET"] = deletionSigningSecret
			return env
		})
	})
	t.Run("S3", func(t *testing.T) {
		srv, bucket := s3test.Shared(t), s3test.Bucket(t)
		st, err := storage.NewS3(context.Background(), srv.Config(bucket))
		if err != nil {
			t.Fatal(err)
		}
		deleteDuringEncoding(t, st, st, s3SigningSecret, func(role, node string) map[string]string {
			return s3NodeEnv(t, role, node, srv, bucket)
		})
	})
}

func deleteDuringEncoding(t *testing.T, st storage.Store, presigner storage.Presigner, secret string, nodeEnv func(role, node string) map[string]string) {
	ctx := context.Background()
	tune := func(env map[string]string) map[string]string {
		env["PLAYHEAD_WEBHOOK_ALLOW_PRIVATE"] = "true"
		env["PLAYHEAD_ENCODE_RENDITION_JOBS"] = "3"
		env["PLAYHEAD_ORPHAN_SWEEP_INTERVAL"] = "300ms"
		return env
	}
	api := binarytest.Start(t, tune(nodeEnv("api", "del-api")))
	pool := api.Pool(t)
	var workers []*binarytest.Server
	for _, name := range []string{"del-w1", "del-w2"} {
		env := tune(nodeEnv("worker", name))
		env["DATABASE_URL"] = api.DBURL
		workers = append(workers, binarytest.Start(t, env))
	}
	alive := append([]*binarytest.Server{api}, workers...)
	const ownerID = 71
	owner, admin := binarytest.Token(t, ownerID, false), binarytest.Token(t, 1, true)
	hook := newReceiver(t, func(int) int { return http.StatusNoContent })
	endpoint := registerWebhookFor(t, api, admin, hook.URL, []string{media.EventDeleted})

	src := testvideo.MP4(t, t.TempDir(), slowSpec)
	id := api.Upload(t, owner, binarytest.Upload{Path: src, FileName: "doomed.mp4", Title: "doomed", Visibility: "PUBLIC"})
	// Playable (the lowest rendition done), the two others running, one on each worker.
	waitGroup(t, pool, id, "playable with a rendition running on each worker", func(g encodeGroup) bool {
		running := g.processing()
		return len(g.renditions) == 3 && g.renditions[0].Status == string(jobqueue.StatusCompleted) && len(running) == 2 &&
			str(running[0].ClaimedBy) != str(running[1].ClaimedBy)
	}, encodeGroup.over, alive...)
	v := mediaOf(t, api, owner, id)
	if !v.Playable || v.HLSURL == "" {
		t.Fatalf("media %d while its renditions run: %+v, want playable with a link", id, v)
	}
	_, _, sourceKey := mediaRow(t, pool, id)
	var thumbnailKey string
	if err := pool.QueryRow(ctx, `SELECT thumbnail_key FROM media WHERE id = $1`, id).Scan(&thumbnailKey); err != nil {
		t.Fatal(err)
	}
	// The links a player holds: the master and a variant playlist, a segment, and the
	// thumbnail as a node signs it (presigned on S3).
	masterURL := api.HTTPURL + v.HLSURL
	links := map[string]string{"master": masterURL}
	status, master := plainGet(t, masterURL)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", masterURL, status, master)
	}
	links["variant"] = firstURI(t, masterURL, master)
	status, variant := plainGet(t, links["variant"])
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", links["variant"], status, variant)
	}
	links["segment"] = firstURI(t, links["variant"], variant)
	signer, err := media.NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	thumb, err := (&media.Links{Signer: signer, Direct: presigner, TTL: encodeTimeout}).File(ctx, ownerID, thumbnailKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(thumb, "/") {
		thumb = api.HTTPURL + thumb
	}
	links["thumbnail"] = thumb
	for name, u := range links {
		if status, body := plainGet(t, u); status != http.StatusOK {
			t.Fatalf("the %s link before the deletion: GET %s: %d %s", name, u, status, body)
		}
	}
	before := keysOf(t, st)
	mine := func(keys []string) []string {
		var out []string
		for _, k := range keys {
			if strings.HasPrefix(k, fmt.Sprintf("hls/%d/", id)) || strings.HasPrefix(k, filepath.Dir(sourceKey)+"/") {
				out = append(out, k)
			}
		}
		return out
	}
	if len(mine(before)) == 0 || !strings.Contains(strings.Join(before, " "), sourceKey) {
		t.Fatalf("the store before the deletion holds %q, want the source %s and outputs of media %d", before, sourceKey, id)
	}

	out := api.MustDo(t, http.StatusAccepted, http.MethodDelete, api.URL("/v1/media/%d", id), owner, nil)
	if string(out) != fmt.Sprintf(`{"id":%d,"status":"DELETED"}`, id) {
		t.Fatalf("DELETE /v1/media/%d: %s", id, out)
	}
	waitState(t, fmt.Sprintf("media %d's deletion job", id), "COMPLETED", func() string {
		var status string
		if err := pool.QueryRow(ctx, `SELECT status FROM jobs WHERE kind = $1 AND subject_id = $2`, mediadelete.KindDelete, id).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status
	}, func(s string) bool { return s == string(jobqueue.StatusCompleted) }, func(s string) bool { return s == string(jobqueue.StatusDead) }, alive...)
	sweeps := func() float64 {
		n := 0.0
		for _, w := range workers {
			n += w.Metric(t, `playhead_storage_orphan_sweeps_total{result="ok"}`)
		}
		return n
	}
	swept := sweeps()
	waitFor(t, encodeTimeout, "an orphan sweep pass after the deletion", func() bool { return sweeps() >= swept+2 }, alive...)

	if left := mine(keysOf(t, st)); len(left) > 0 {
		t.Errorf("after the deletion and a sweep the store still holds %q of media %d", left, id)
	}
	if u, ok := st.(storage.UnfinishedWrites); ok {
		for w, err := range u.Unfinished(ctx, "", time.Now().Add(time.Hour)) {
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("an unfinished write is left: %+v", w)
		}
	}
	var jobs []string
	rows, err := pool.Query(ctx, `SELECT kind || ' ' || status FROM jobs WHERE subject_id = $1 AND kind = ANY($2) ORDER BY id`,
		id, append([]string{ingest.KindIngest, mediadelete.KindDelete}, encodejobs.Kinds...))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if rows.Err() != nil || len(jobs) != 1 || jobs[0] != mediadelete.KindDelete+" COMPLETED" {
		t.Errorf("jobs of the deleted media: %q (%v), want only its deletion, COMPLETED", jobs, rows.Err())
	}
	var rowLeft bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM media WHERE id = $1)`, id).Scan(&rowLeft); err != nil || rowLeft {
		t.Errorf("the media row is still there (%v)", err)
	}

	waitDelivery(t, api, admin, endpoint.ID, id, "DELIVERED")
	got := hook.requests()
	if len(got) != 1 {
		t.Fatalf("the webhook got %d requests, want the media.deleted event once", len(got))
	}
	var event webhookBody
	if err := json.Unmarshal(got[0].body, &event); err != nil || event.Type != media.EventDeleted || event.Data.MediaID != id ||
		event.Data.OwnerID != ownerID || event.Data.Status != string(media.StatusDeleted) {
		t.Errorf("the webhook got %s (%v), want media.deleted of media %d", got[0].body, err, id)
	}
	if err := verifyWithStandardWebhooks(t, endpoint.Secret, got[0].header, got[0].body); err != nil {
		t.Errorf("the Standard Webhooks library refuses the delivery's signature: %v", err)
	}
	if err := verifyWithStandardWebhooks(t, endpoint.Secret, got[0].header, append([]byte(" "), got[0].body...)); err == nil {
		t.Error("the Standard Webhooks library accepts a changed body: the check proves nothing")
	}

	for name, u := range links {
		if status, body := plainGet(t, u); status != http.StatusNotFound {
			t.Errorf("the %s link after the deletion: GET %s: %d %s, want 404", name, u, status, body)
		}
	}
	if status, body, err := api.Do(http.MethodGet, api.URL("/v1/media/%d", id), owner, nil); err != nil || status != http.StatusNotFound {
		t.Errorf("GET /v1/media/%d after the deletion: %d %s %v, want 404", id, status, body, err)
	}
}

// keysOf lists every key of st.
func keysOf(t *testing.T, st storage.Store) []string {
	t.Helper()
	var keys []string
	for o, err := range st.List(context.Background(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// verifyWithStandardWebhooks checks a delivery with the Standard Webhooks reference library for
// JavaScript (npm standardwebhooks, in the repository's node_modules): Webhook(secret).verify
// throws unless a signature of the header is the body's, with a timestamp within its tolerance.
func verifyWithStandardWebhooks(t *testing.T, secret string, h http.Header, body []byte) error {
	t.Helper()
	dir := t.TempDir()
	headers := map[string]string{}
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		headers[name] = h.Get(name)
	}
	raw, err := json.Marshal(headers)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.Abs(filepath.Join("..", "..", "node_modules", "standardwebhooks"))
	if err != nil {
		t.Fatal(err)
	}
	script := `const fs = require("fs");
const { Webhook } = require(process.argv[2]);
new Webhook(process.argv[3]).verify(fs.readFileSync(process.argv[5], "utf8"), JSON.parse(fs.readFileSync(process.argv[4], "utf8")));`
	files := map[string][]byte{"verify.js": []byte(script), "headers.json": raw, "body.json": body}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("node", filepath.Join(dir, "verify.js"), lib, secret, filepath.Join(dir, "headers.json"), filepath.Join(dir, "body.json"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}
