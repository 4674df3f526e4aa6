package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/oidctest"
	"github.com/playhead/playhead/members"
)

// memberExport is the part of GET /v1/me/export these tests read.
type memberExport struct {
	MemberID int64 `json:"member_id"`
	Identity *struct {
		Issuer  string `json:"issuer"`
		Subject string `json:"subject"`
	} `json:"identity"`
	History []json.RawMessage `json:"history"`
}

// readExport reads token's export from s.
func readExport(t *testing.T, s *binarytest.Server, token string) memberExport {
	t.Helper()
	var doc memberExport
	if err := json.Unmarshal(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/me/export"), token, nil), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestProviderMember_ErasedAndBack: the real provider's token makes a member on first sight,
// the same on two nodes, whose export names its issuer and subject. After the member erases
// themselves on one node, that token is 401 on both (the other one had the mapping cached),
// and a token the provider issues after the erasure is a new member with nothing of the old.
func TestProviderMember_ErasedAndBack(t *testing.T) {
	const subject = "auth0|6571a"
	p := oidctest.Start(t, oidctest.Options{Users: []oidctest.User{{ID: subject, Username: "viewer", Password: "pw"}},
		RedirectURIs: []string{"http://127.0.0.1:1/callback"}})
	env := map[string]string{"PLAYHEAD_OIDC_ISSUER": p.Issuer, "PLAYHEAD_OIDC_AUDIENCE": p.ClientID}
	s1 := binarytest.Start(t, env)
	env["DATABASE_URL"] = s1.DBURL
	s2 := binarytest.Start(t, env)
	media := s1.CreateMedia(t, binarytest.Token(t, 1, true), "provider member")

	token := p.SignIn(t, "viewer", "pw")
	s2.MustDo(t, http.StatusNoContent, http.MethodPut, s2.URL("/v1/playback/%d", media), token, map[string]any{"position_ms": 61_000})
	first := readExport(t, s1, token)
	if first.MemberID < members.FirstID || first.Identity == nil || first.Identity.Issuer != p.Issuer || first.Identity.Subject != subject {
		t.Fatalf("export: member %d, identity %+v; want an id from 2^40 named %s at %s", first.MemberID, first.Identity, subject, p.Issuer)
	}
	// The write of node 2 is flushed by node 2: wait for it in node 1's export.
	for len(readExport(t, s1, token).History) != 1 {
		time.Sleep(50 * time.Millisecond)
	}
	if again := readExport(t, s2, token); again.MemberID != first.MemberID {
		t.Fatalf("node 2 maps the subject to %d, node 1 to %d", again.MemberID, first.MemberID)
	}

	s1.MustDo(t, http.StatusAccepted, http.MethodDelete, s1.URL("/v1/me"), token, nil)
	for _, s := range []*binarytest.Server{s1, s2} {
		// Node 2 learns of the erasure from its notification: wait for it.
		for {
			code, body, err := s.Do(http.MethodGet, s.URL("/v1/me/export"), token, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code == http.StatusUnauthorized && strings.Contains(string(body), "erased") {
				break
			}
			if code != http.StatusOK {
				t.Fatalf("erased member's token: %d %s", code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A token's iat is in whole seconds: the provider's next token is issued after the erasure
	// once the clock is past its second.
	var erasedAt time.Time
	if err := s1.Pool(t).QueryRow(context.Background(), `SELECT erased_at FROM member_erasures WHERE member_id = $1`, first.MemberID).Scan(&erasedAt); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(erasedAt.Truncate(time.Second).Add(time.Second)))
	fresh := p.SignIn(t, "viewer", "pw")
	for _, s := range []*binarytest.Server{s2, s1} {
		doc := readExport(t, s, fresh)
		if doc.MemberID == first.MemberID || doc.MemberID < members.FirstID || len(doc.History) != 0 || doc.Identity == nil || doc.Identity.Subject != subject {
			t.Fatalf("after the erasure: member %d (erased %d), %d history items, identity %+v; want a new, empty member",
				doc.MemberID, first.MemberID, len(doc.History), doc.Identity)
		}
	}
	if code, body, _ := s2.Do(http.MethodGet, s2.URL("/v1/me/export"), token, nil); code != http.StatusUnauthorized {
		t.Fatalf("the erased member's token after the new sign-up: %d %s", code, body)
	}
}
