package playhead_test

// One integrator's flow through the generated client, against a running server:
// cmd/api's TestGeneratedGoClient starts the real binary, generates client.gen.go from the
// document it serves, and runs this test with the server's address and tokens in the
// environment. Each step goes through the generated code (its request builders, its typed
// bodies and its response parsers); a step the document describes wrongly fails here.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/playhead/playhead/api/clients/go/playhead"
)

// The environment cmd/api's TestGeneratedGoClient sets.
const (
	envURL         = "PLAYHEAD_URL"          // the public API, http://127.0.0.1:port
	envMemberToken = "PLAYHEAD_MEMBER_TOKEN" // a member's bearer token
	envAdminToken  = "PLAYHEAD_ADMIN_TOKEN"  // an admin's bearer token
	envVideo       = "PLAYHEAD_VIDEO"        // a small video file to upload
)

// pollEvery is the pause between two reads of a state the flow waits for.
const pollEvery = 100 * time.Millisecond

// position is the flow's report: before the middle of the 2 s video the test uploads, so the
// media stays in progress (a finished one leaves continue watching).
const position = 600

func mustEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: this test runs against a server that cmd/api's TestGeneratedGoClient starts "+
			"(go test -run TestGeneratedGoClient ./cmd/api in the repository root)", name)
	}
	return v
}

// bearer sends token with a request.
func bearer(token string) playhead.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// TestFlow registers a webhook, uploads a video and follows it to READY, receives the
// media.ready delivery, reports a position and finds it in continue watching, all through
// the generated client and its types.
func TestFlow(t *testing.T) {
	ctx := t.Context()
	member, admin := bearer(mustEnv(t, envMemberToken)), bearer(mustEnv(t, envAdminToken))
	client, err := playhead.NewClientWithResponses(mustEnv(t, envURL))
	if err != nil {
		t.Fatal(err)
	}

	// The document itself: a YAML mapping the generated parser reads.
	doc, err := client.OpenapiWithResponse(ctx)
	if err != nil {
		t.Fatalf("GET /openapi.yaml through the generated client: %v", err)
	}
	if doc.StatusCode() != http.StatusOK || doc.YAML200 == nil || (*doc.YAML200)["openapi"] != "3.1.0" {
		t.Fatalf("GET /openapi.yaml: %d, parsed %v; want 200 and a mapping with openapi: 3.1.0", doc.StatusCode(), doc.YAML200 != nil)
	}
	if h, err := client.HealthzHeadWithResponse(ctx); err != nil || h.StatusCode() != http.StatusOK {
		t.Fatalf("HEAD /healthz: %v, %v; want 200", h, err)
	}

	// A webhook endpoint of our own, registered before the upload so that its media.ready
	// event is delivered to it.
	deliveries := make(chan playhead.WebhookEvent, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e playhead.WebhookEvent
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil || r.Header.Get("webhook-id") == "" {
			t.Errorf("a delivery that is not a WebhookEvent with a webhook-id: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		deliveries <- e
	}))
	defer receiver.Close()
	events := []playhead.EventType{playhead.MediaReady}
	hook, err := client.CreateWebhookWithResponse(ctx, playhead.CreateWebhookJSONRequestBody{Url: receiver.URL + "/hook", Events: &events}, admin)
	if err != nil || hook.JSON201 == nil {
		t.Fatalf("POST /v1/admin/webhooks: %v, %v", err, hook)
	}
	defer func() {
		if del, err := client.DeleteWebhookWithResponse(context.WithoutCancel(ctx), hook.JSON201.Id, admin); err != nil || del.StatusCode() != http.StatusNoContent {
			t.Errorf("DELETE /v1/admin/webhooks/%d: %v, %v", hook.JSON201.Id, err, del)
		}
	}()
	listed, err := client.ListWebhooksWithResponse(ctx, admin)
	if err != nil || listed.JSON200 == nil || len(listed.JSON200.Webhooks) != 1 || listed.JSON200.Webhooks[0].Url != receiver.URL+"/hook" {
		t.Fatalf("GET /v1/admin/webhooks: %v, %v; want the one endpoint just registered", err, listed)
	}

	// The upload, as the generated multipart body type describes it.
	video, err := os.ReadFile(mustEnv(t, envVideo))
	if err != nil {
		t.Fatal(err)
	}
	title, visibility := "generated Go client", playhead.PRIVATE
	form := playhead.UploadMediaMultipartRequestBody{Title: &title, Visibility: &visibility}
	form.File.InitFromBytes(video, "clip.mp4")
	contentType, body := multipartBody(t, form)
	upload, err := client.UploadMediaWithBodyWithResponse(ctx, contentType, body, member)
	if err != nil || upload.JSON202 == nil {
		t.Fatalf("POST /v1/media: %v, %v", err, upload)
	}
	id := upload.JSON202.Id
	if upload.JSON202.Status != "PROCESSING" || upload.JSON202.Title != title {
		t.Fatalf("POST /v1/media answered %+v, want PROCESSING and the title given", *upload.JSON202)
	}
	for {
		m, err := client.GetMediaWithResponse(ctx, id, member)
		if err != nil || m.JSON200 == nil {
			t.Fatalf("GET /v1/media/%d: %v, %v", id, err, m)
		}
		if m.JSON200.Status == playhead.MediaStatusREADY {
			if m.JSON200.HlsUrl == nil {
				t.Fatalf("media %d is READY without an hls_url", id)
			}
			break
		}
		if m.JSON200.Status == playhead.MediaStatusFAILED {
			t.Fatalf("media %d FAILED: %v", id, m.JSON200.FailureReason)
		}
		time.Sleep(pollEvery)
	}
	e := <-deliveries
	if e.Type != playhead.MediaReady || int64(e.Data.MediaId) != int64(id) || e.Data.Status != "READY" {
		t.Fatalf("webhook delivery %+v, want media.ready of media %d", e, id)
	}

	// A position report, read back from this node's buffer and then from continue watching
	// once it is flushed. It is before the middle of the 2 s video: a finished one would leave
	// continue watching.
	put, err := client.ReportPlaybackWithResponse(ctx, id, playhead.ReportPlaybackJSONRequestBody{PositionMs: position}, member)
	if err != nil || put.StatusCode() != http.StatusNoContent {
		t.Fatalf("PUT /v1/playback/%d: %v, %v", id, err, put)
	}
	pos, err := client.GetPlaybackWithResponse(ctx, id, member)
	if err != nil || pos.JSON200 == nil || pos.JSON200.PositionMs != position || pos.JSON200.Finished {
		t.Fatalf("GET /v1/playback/%d: %v, %+v; want position_ms %d, not finished", id, err, pos.JSON200, position)
	}
	for {
		list, err := client.ListPlaybackWithResponse(ctx, &playhead.ListPlaybackParams{}, member)
		if err != nil || list.JSON200 == nil {
			t.Fatalf("GET /v1/playback: %v, %v", err, list)
		}
		if len(list.JSON200.Items) > 0 {
			it := list.JSON200.Items[0]
			if len(list.JSON200.Items) != 1 || it.MediaId != id || it.PositionMs != position || it.Title != title {
				t.Fatalf("continue watching %+v, want only media %d at %d ms", list.JSON200.Items, id, position)
			}
			break
		}
		time.Sleep(pollEvery) // not flushed yet
	}
}

// multipartBody writes form as multipart/form-data: the fields of the generated type, the
// file under its name.
func multipartBody(t *testing.T, form playhead.UploadMediaMultipartRequestBody) (string, io.Reader) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if form.Title != nil {
		_ = mw.WriteField("title", *form.Title)
	}
	if form.Visibility != nil {
		_ = mw.WriteField("visibility", string(*form.Visibility))
	}
	fw, err := mw.CreateFormFile("file", form.File.Filename())
	if err != nil {
		t.Fatal(err)
	}
	content, err := form.File.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}
