package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/oidctest"
	"github.com/playhead/playhead/members"
)

// TestIdentity_RealProvider runs a node against the zitadel example OpenID Provider (by
// discovery, ID tokens as bearers, the admin by its sub): the provider's token of a string
// subject uploads, reports and lists continue watching; another member sees none of it; the
// admin opens the job queue. Then the provider rotates (a restart with a new key): its new
// token is accepted at its first use; while it is down, tokens of known keys keep working and
// a token of a key never read is refused 401, counted as unknown_key.
func TestIdentity_RealProvider(t *testing.T) {
	viewer := oidctest.User{ID: "auth0|6571a-viewer", Username: "viewer", Password: "pw-viewer"}
	other := oidctest.User{ID: "9b0a5a3e-6c55-4b53-9a43-9d0d1f0f3c21", Username: "other", Password: "pw-other"}
	admin := oidctest.User{ID: "auth0|admin", Username: "admin", Password: "pw-admin"}
	p := oidctest.Start(t, oidctest.Options{Users: []oidctest.User{viewer, other, admin}, RedirectURIs: []string{"http://127.0.0.1:1/callback"}})
	env := pipelineEnv("all", "identity", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_OIDC_ISSUER"], env["PLAYHEAD_OIDC_AUDIENCE"] = p.Issuer, p.ClientID
	env["PLAYHEAD_OIDC_ADMIN_CLAIM"], env["PLAYHEAD_OIDC_ADMIN_VALUE"] = "sub", admin.ID
	// Positions are written as they come, so the list reads them at once.
	env["PLAYHEAD_PLAYBACK_WRITE_MODE"] = "sync"
	// The test's short video keeps a resume point (below the resume rule's minimum duration,
	// continue watching would list nothing).
	env["PLAYHEAD_RESUME_MIN_DURATION"] = "0s"
	s := binarytest.Start(t, env)

	tok := p.SignIn(t, viewer.Username, viewer.Password)
	id, _ := readyUpload(t, s, tok, "the viewer's film", "PRIVATE")
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), tok, map[string]any{"position_ms": 500})
	if got := continueWatching(t, s, tok); len(got) != 1 || got[0] != id {
		t.Fatalf("the viewer's continue watching = %v, want [%d]", got, id)
	}
	var member int64
	if err := s.Pool(t).QueryRow(t.Context(), `SELECT member_id FROM member_subjects WHERE issuer = $1 AND subject = $2`, p.Issuer, viewer.ID).Scan(&member); err != nil || member < members.FirstID {
		t.Fatalf("the viewer's member: %d (%v), want one from %d", member, err, members.FirstID)
	}

	otherTok := p.SignIn(t, other.Username, other.Password)
	s.MustDo(t, http.StatusNotFound, http.MethodGet, s.URL("/v1/media/%d", id), otherTok, nil)
	if got := continueWatching(t, s, otherTok); len(got) != 0 {
		t.Fatalf("another member's continue watching = %v, want none", got)
	}
	s.MustDo(t, http.StatusForbidden, http.MethodGet, s.URL("/v1/admin/jobs"), tok, nil)
	s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/jobs"), p.SignIn(t, admin.Username, admin.Password), nil)

	// Rotation: the provider restarts with a new key; its next token reads the JWKS again.
	p.Restart(t)
	rotated, unused := p.SignIn(t, viewer.Username, viewer.Password), p.SignIn(t, viewer.Username, viewer.Password)
	s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), rotated, map[string]any{"position_ms": 600})
	// Down: a token of the key read keeps working (never verified before, so not from the cache).
	p.Stop()
	if got := continueWatching(t, s, unused); len(got) != 1 || got[0] != id {
		t.Fatalf("continue watching with the provider down = %v, want [%d]", got, id)
	}
	// A key the node never read: the provider restarts with another, issues a token, goes down.
	p.Restart(t)
	unknown := p.SignIn(t, viewer.Username, viewer.Password)
	p.Stop()
	before := refusals(t, s, "unknown_key")
	s.MustDo(t, http.StatusUnauthorized, http.MethodGet, s.URL("/v1/playback/"), unknown, nil)
	if got := refusals(t, s, "unknown_key"); got != before+1 {
		t.Fatalf("unknown_key refusals went from %v to %v, want +1", before, got)
	}
}

// continueWatching lists the media ids of GET /v1/playback/ for token.
func continueWatching(t *testing.T, s *binarytest.Server, token string) []int64 {
	t.Helper()
	var page struct {
		Items []struct {
			MediaID int64 `json:"media_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback/"), token, nil), &page); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, it := range page.Items {
		ids = append(ids, it.MediaID)
	}
	return ids
}
