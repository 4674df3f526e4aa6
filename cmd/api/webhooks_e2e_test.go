package main

// Webhooks from the outbox through the real binary: the receivers are httptest servers on
// loopback (PLAYHEAD_WEBHOOK_ALLOW_PRIVATE=true), and every signature is checked with
// verifySignature, written from the Standard Webhooks specification without the webhooks
// package.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/media"
)

// webhookTimeout bounds how long a test waits for a delivery.
const webhookTimeout = 2 * time.Minute

// webhookEnv is a role=all node whose webhooks may reach loopback, with quick retries.
func webhookEnv(t *testing.T, node, storageDir string) map[string]string {
	env := pipelineEnv("all", node, storageDir, t.TempDir(), "ultrafast")
	env["PLAYHEAD_WEBHOOK_ALLOW_PRIVATE"] = "true"
	env["PLAYHEAD_WEBHOOK_MAX_ATTEMPTS"] = "3"
	env["PLAYHEAD_WEBHOOK_RETRY_CAP"] = "1s"
	return env
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a local webhook endpoint that answers each request with answer(n), n counting
// from 1, and keeps what it got.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	seen chan struct{} // one value per request, after it is recorded
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{seen: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := make([]byte, 0, 512)
		buf := make([]byte, 512)
		for {
			n, err := req.Body.Read(buf)
			body = append(body, buf[:n]...)
			if err != nil {
				break
			}
		}
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		r.seen <- struct{}{}
		w.WriteHeader(answer(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// waitRequests waits until the receiver has had n requests.
func (r *receiver) waitRequests(t *testing.T, n int) []received {
	t.Helper()
	deadline := time.After(webhookTimeout)
	for len(r.requests()) < n {
		select {
		case <-r.seen:
		case <-deadline:
			t.Fatalf("receiver %s got %d requests in %s, want %d", r.URL, len(r.requests()), webhookTimeout, n)
		}
	}
	return r.requests()
}

// verifySignature checks a request's Standard Webhooks headers against secret (whsec_<base64>),
// as the specification tells receivers to: HMAC-SHA256 with the base64-decoded key over
// "id.timestamp.body", compared in constant time with each "v1," signature of the header, and
// a timestamp within 5 minutes of now.
func verifySignature(secret string, h http.Header, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("secret %q is not whsec_<base64>", secret)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing headers: id %q, timestamp %q, signature %q", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %v", ts, err)
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %q is %s away from now", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, sig, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q matches", sigs)
}

// registered is POST /v1/admin/webhooks's answer.
type registered struct {
	ID     int64    `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Secret string   `json:"secret"`
}

// registerWebhook registers url for media.ready and media.failed, the events these tests follow
// (an upload's media.playable comes first; registered without events, an endpoint gets it too).
func registerWebhook(t *testing.T, s *binarytest.Server, adminToken, url string) registered {
	t.Helper()
	return registerWebhookFor(t, s, adminToken, url, []string{media.EventReady, media.EventFailed})
}

// registerWebhookFor registers url for events (nil: none named, so every type).
func registerWebhookFor(t *testing.T, s *binarytest.Server, adminToken, url string, events []string) registered {
	t.Helper()
	body := map[string]any{"url": url}
	if events != nil {
		body["events"] = events
	}
	out := s.MustDo(t, http.StatusCreated, http.MethodPost, s.URL("/v1/admin/webhooks"), adminToken, body)
	var r registered
	if err := json.Unmarshal(out, &r); err != nil || r.ID <= 0 || !strings.HasPrefix(r.Secret, "whsec_") {
		t.Fatalf("POST /v1/admin/webhooks answered %s (%v), want an id and a whsec_ secret", out, err)
	}
	return r
}

// deliveryView is one entry of GET /v1/admin/webhooks/{id}/deliveries.
type deliveryView struct {
	ID        int64   `json:"id"`
	WebhookID string  `json:"webhook_id"`
	MediaID   int64   `json:"media_id"`
	Status    string  `json:"status"`
	JobID     *int64  `json:"job_id"`
	Attempts  *int    `json:"attempts"`
	LastError *string `json:"last_error"`
}

// waitDelivery waits until endpoint's delivery about media has status.
func waitDelivery(t *testing.T, s *binarytest.Server, adminToken string, endpoint, mediaID int64, status string) deliveryView {
	t.Helper()
	deadline := time.Now().Add(webhookTimeout)
	for {
		out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/webhooks/%d/deliveries", endpoint), adminToken, nil)
		var v struct {
			Deliveries []deliveryView `json:"deliveries"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("deliveries of webhook %d: %s: %v", endpoint, out, err)
		}
		for _, d := range v.Deliveries {
			if d.MediaID == mediaID && d.Status == status {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook %d has no %s delivery about media %d after %s: %s", endpoint, status, mediaID, webhookTimeout, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// webhookBody is a delivery's payload.
type webhookBody struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		EventID int64  `json:"event_id"`
		MediaID int64  `json:"media_id"`
		OwnerID int64  `json:"owner_id"`
		Status  string `json:"status"`
	} `json:"data"`
}

// checkDelivery checks that req is a signed media.ready event about media id.
func checkDelivery(t *testing.T, what string, req received, secret string, id, owner int64) webhookBody {
	t.Helper()
	if err := verifySignature(secret, req.header, req.body); err != nil {
		t.Fatalf("%s: the signature does not verify with the secret shown at registration: %v", what, err)
	}
	var b webhookBody
	if err := json.Unmarshal(req.body, &b); err != nil {
		t.Fatalf("%s: body %s: %v", what, req.body, err)
	}
	if b.Type != "media.ready" || b.Data.MediaID != id || b.Data.OwnerID != owner || b.Data.Status != "READY" || b.Timestamp.IsZero() {
		t.Fatalf("%s: body %s, want a media.ready event about media %d of member %d", what, req.body, id, owner)
	}
	return b
}

// TestWebhooks_DeliveredSignedRetriedDead: an upload becomes READY and three receivers
// registered before it get its event. The one that answers 204 gets one delivery whose
// signature verifies with the secret shown at registration; the one that answers 500 twice gets
// it on the third attempt, every attempt with the same webhook-id; the one that never answers
// 2xx gets its 3 attempts (PLAYHEAD_WEBHOOK_MAX_ATTEMPTS) and leaves a DEAD job of kind webhook
// in the admin job list.
func TestWebhooks_DeliveredSignedRetriedDead(t *testing.T) {
	s := binarytest.Start(t, webhookEnv(t, "webhooks", t.TempDir()))
	adminToken := binarytest.Token(t, 1, true)
	const ownerID = 31
	owner := binarytest.Token(t, ownerID, false)

	ok := newReceiver(t, func(int) int { return http.StatusNoContent })
	flaky := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	never := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	okHook, flakyHook, neverHook := registerWebhook(t, s, adminToken, ok.URL+"/hook"), registerWebhook(t, s, adminToken, flaky.URL), registerWebhook(t, s, adminToken, never.URL)
	all := registerWebhookFor(t, s, adminToken, "https://8.8.8.8/all", nil)
	if !slices.Equal(slices.Sorted(slices.Values(all.Events)), slices.Sorted(slices.Values(media.EventTypes))) {
		t.Errorf("a webhook registered without events has events %v, want every event type %v", all.Events, media.EventTypes)
	}
	s.MustDo(t, http.StatusNoContent, http.MethodDelete, s.URL("/v1/admin/webhooks/%d", all.ID), adminToken, nil)
	// The secret is shown once: neither the list nor the endpoint's own page carries it.
	for _, path := range []string{"/v1/admin/webhooks", fmt.Sprintf("/v1/admin/webhooks/%d", okHook.ID)} {
		out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("%s", path), adminToken, nil)
		if strings.Contains(string(out), strings.TrimPrefix(okHook.Secret, "whsec_")) || strings.Contains(string(out), `"secret"`) {
			t.Errorf("GET %s shows a secret: %s", path, out)
		}
	}

	id, _ := readyUpload(t, s, owner, "webhook clip", "PRIVATE")

	// The healthy receiver: one signed delivery.
	got := ok.waitRequests(t, 1)
	body := checkDelivery(t, "the 204 receiver", got[0], okHook.Secret, id, ownerID)
	if err := verifySignature(flakyHook.Secret, got[0].header, got[0].body); err == nil {
		t.Fatal("a delivery verifies with another endpoint's secret: the check cannot fail")
	}
	waitDelivery(t, s, adminToken, okHook.ID, id, "DELIVERED")

	// The receiver that fails twice: the third attempt succeeds, with the first one's id.
	got = flaky.waitRequests(t, 3)
	for i, r := range got {
		checkDelivery(t, fmt.Sprintf("attempt %d to the flaky receiver", i+1), r, flakyHook.Secret, id, ownerID)
		if r.header.Get("webhook-id") != got[0].header.Get("webhook-id") {
			t.Fatalf("attempt %d carries webhook-id %q, attempt 1 %q: retries must keep the id", i+1, r.header.Get("webhook-id"), got[0].header.Get("webhook-id"))
		}
	}
	d := waitDelivery(t, s, adminToken, flakyHook.ID, id, "DELIVERED")
	if d.Attempts == nil || *d.Attempts != 3 || d.WebhookID != got[0].header.Get("webhook-id") {
		t.Errorf("flaky receiver's delivery %+v, want DELIVERED on attempt 3 with webhook-id %q", d, got[0].header.Get("webhook-id"))
	}

	// The receiver that never succeeds: DEAD after 3 attempts, in the admin job list.
	dead := waitDelivery(t, s, adminToken, neverHook.ID, id, "DEAD")
	if n := len(never.requests()); n != 3 {
		t.Errorf("the failing receiver got %d attempts, want 3", n)
	}
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/jobs?status=DEAD"), adminToken, nil)
	var jobs struct {
		Jobs []struct {
			ID        int64  `json:"id"`
			Kind      string `json:"kind"`
			Subject   int64  `json:"subject_id"`
			Attempts  int    `json:"attempt_count"`
			LastError string `json:"last_error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &jobs); err != nil {
		t.Fatalf("GET /v1/admin/jobs?status=DEAD: %s: %v", out, err)
	}
	found := false
	for _, j := range jobs.Jobs {
		if j.Kind == "webhook" && j.Subject == dead.ID {
			found = j.Attempts == 3 && strings.Contains(j.LastError, "HTTP 503")
			t.Logf("DEAD job %d (webhook delivery %d): %d attempts, last error %q", j.ID, j.Subject, j.Attempts, j.LastError)
		}
	}
	if !found {
		t.Fatalf("no DEAD webhook job for delivery %d with 3 attempts and the receiver's 503 in the admin job list: %s", dead.ID, out)
	}
	// The others were not sent again meanwhile: exactly once to the healthy receiver.
	if n := len(ok.requests()); n != 1 {
		t.Errorf("the 204 receiver got %d requests, want 1", n)
	}
	t.Logf("media %d READY → %s delivered once (webhook-id %s, event %d), flaky delivered on attempt 3, failing one DEAD",
		id, ok.URL, got[0].header.Get("webhook-id"), body.Data.EventID)
}

// TestWebhooks_PrivateReceiverRefused: without PLAYHEAD_WEBHOOK_ALLOW_PRIVATE, a receiver on a
// loopback, private or link-local address is refused at registration with 400 and a clear
// error; a public address is accepted (never called: no event happens), shown, and deleted.
func TestWebhooks_PrivateReceiverRefused(t *testing.T) {
	s := binarytest.Start(t, pipelineEnv("api", "webhooks-private", t.TempDir(), t.TempDir(), "ultrafast"))
	adminToken := binarytest.Token(t, 1, true)
	local := newReceiver(t, func(int) int { return http.StatusNoContent })
	for _, url := range []string{local.URL, "http://localhost:9/hook", "http://[::1]/hook", "https://10.0.0.7/hook",
		"https://192.168.1.10/hook", "http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/"} {
		status, out, err := s.Do(http.MethodPost, s.URL("/v1/admin/webhooks"), adminToken, map[string]any{"url": url})
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error string `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(out, &e) != nil || !strings.Contains(e.Error, "public address") {
			t.Errorf("POST /v1/admin/webhooks {url: %s}: %d %s, want 400 saying it must be a public address", url, status, out)
		}
	}
	out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/webhooks"), adminToken, nil)
	if string(out) != `{"webhooks":[]}` {
		t.Fatalf("refused registrations left endpoints: %s", out)
	}
	hook := registerWebhook(t, s, adminToken, "https://8.8.8.8/hook")
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/webhooks/%d", hook.ID), adminToken, nil)
	s.MustDo(t, http.StatusNoContent, http.MethodDelete, s.URL("/v1/admin/webhooks/%d", hook.ID), adminToken, nil)
	s.MustDo(t, http.StatusNotFound, http.MethodGet, s.URL("/v1/admin/webhooks/%d", hook.ID), adminToken, nil)
	if n := len(local.requests()); n != 0 {
		t.Errorf("the loopback receiver was called %d times", n)
	}
}

// TestWebhooks_KillDuringDelivery: the node is killed (SIGKILL) while a receiver holds its
// delivery open; the receiver answers nothing until the kill is seen. A new node on the same
// database delivers the event after the lease expires, with the same webhook-id and a valid
// signature: at least once, never lost.
func TestWebhooks_KillDuringDelivery(t *testing.T) {
	storageDir := t.TempDir()
	s := binarytest.Start(t, webhookEnv(t, "webhooks-killed", storageDir))
	adminToken := binarytest.Token(t, 1, true)
	const ownerID = 32
	owner := binarytest.Token(t, ownerID, false)
	killed := make(chan struct{})
	r := newReceiver(t, func(n int) int {
		if n == 1 {
			<-killed // hold the first delivery until the node is gone
		}
		return http.StatusNoContent
	})
	hook := registerWebhook(t, s, adminToken, r.URL)
	id, _ := readyUpload(t, s, owner, "killed mid-delivery", "PRIVATE")

	first := r.waitRequests(t, 1)[0]
	s.Kill(t)
	close(killed)
	checkDelivery(t, "the attempt cut by the kill", first, hook.Secret, id, ownerID)

	env := webhookEnv(t, "webhooks-restarted", storageDir)
	env["DATABASE_URL"] = s.DBURL
	restarted := binarytest.Start(t, env)
	got := r.waitRequests(t, 2)
	checkDelivery(t, "the delivery after the restart", got[1], hook.Secret, id, ownerID)
	if got[1].header.Get("webhook-id") != first.header.Get("webhook-id") {
		t.Fatalf("after the restart webhook-id %q, before the kill %q: the same event must keep its id", got[1].header.Get("webhook-id"), first.header.Get("webhook-id"))
	}
	d := waitDelivery(t, restarted, adminToken, hook.ID, id, "DELIVERED")
	if d.Attempts == nil || *d.Attempts != 1 {
		t.Errorf("delivery %+v, want DELIVERED on attempt 1 (the kill lost a lease, which spends no attempt)", d)
	}
	t.Logf("killed during delivery %s; delivered after the restart on attempt 1 with the same webhook-id", first.header.Get("webhook-id"))
}
