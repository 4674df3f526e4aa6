package export_test

import (
	"encoding/json"
	"io"
	"testing"
)

// TestExport_Identity: the provider's (issuer, subject) a member is known by is theirs to see
// in their export; a member of the shared-secret mode has none.
func TestExport_Identity(t *testing.T) {
	b := setup(t)
	b.exec(t, `INSERT INTO members (id) VALUES (1)`)
	b.exec(t, `INSERT INTO member_subjects (issuer, subject, member_id) VALUES ('http://localhost:41234/', 'auth0|6571a', 1)`)
	for member, want := range map[int64]*struct{ Issuer, Subject string }{
		1: {"http://localhost:41234/", "auth0|6571a"},
		2: nil,
	} {
		resp := b.get(t, member, "")
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("member %d: %d %v %s", member, resp.StatusCode, err, raw)
		}
		if err := memberExportSchema(t).VisitJSON(mustDecode(t, raw)); err != nil {
			t.Errorf("member %d: %v", member, err)
		}
		var doc struct {
			Identity *struct {
				Issuer  string `json:"issuer"`
				Subject string `json:"subject"`
			} `json:"identity"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		switch {
		case want == nil && doc.Identity != nil:
			t.Errorf("member %d: identity %+v, want none", member, *doc.Identity)
		case want != nil && (doc.Identity == nil || doc.Identity.Issuer != want.Issuer || doc.Identity.Subject != want.Subject):
			t.Errorf("member %d: identity %+v, want %+v", member, doc.Identity, *want)
		}
	}
}
