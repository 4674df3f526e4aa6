package putpath

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/internal/binarytest"
)

// tokenFunc mints the token of member (an admin's when admin), and names its subject when
// the token is a provider's.
type tokenFunc func(member int64, admin bool) (token, subject string, err error)

// secretTokens are the shared secret's HS256 tokens, the subject the member id.
func secretTokens(member int64, admin bool) (string, string, error) {
	tok, err := auth.Mint([]byte(binarytest.Secret), member, admin, time.Hour)
	return tok, "", err
}

// The JWKS file mode's claims: an operator's backend minting its members' tokens.
const (
	jwksIssuer   = "https://id.bench.test/"
	jwksAudience = "playhead-bench"
	jwksKID      = "bench-rs256"
	jwksAdmin    = "playhead-admin"
)

// keyTokens signs tokens with an RS256 key whose public half is in a JWKS file.
type keyTokens struct {
	key  *rsa.PrivateKey
	file string
}

func newKeyTokens(t *testing.T) *keyTokens {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := auth.PublicJWKS(key, jwksKID)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &keyTokens{key: key, file: file}
}

// env is the environment of a node in the JWKS file mode; nil for none. The shared secret
// stays set (binarytest's): only the tokens' alg picks the mode, and every request of the load
// carries an RS256 token.
func (k *keyTokens) env() map[string]string {
	if k == nil {
		return nil
	}
	return map[string]string{"PLAYHEAD_OIDC_ISSUER": jwksIssuer, "PLAYHEAD_OIDC_AUDIENCE": jwksAudience, "PLAYHEAD_JWKS_FILE": k.file,
		"PLAYHEAD_OIDC_ADMIN_CLAIM": "roles", "PLAYHEAD_OIDC_ADMIN_VALUE": jwksAdmin}
}

// token mints member's token: the subject a string, as a provider's.
func (k *keyTokens) token(member int64, admin bool) (string, string, error) {
	c := auth.KeyClaims{Issuer: jwksIssuer, Audience: jwksAudience, Subject: fmt.Sprintf("bench-member-%d", member), TTL: time.Hour}
	if admin {
		c.Extra = map[string]any{"roles": []string{jwksAdmin}}
	}
	tok, err := auth.MintWithKey(k.key, jwksKID, c)
	return tok, c.Subject, err
}

// resolveMembers sets each report's member to the id the node gave its token's subject (on
// the first report of each, sendEach's).
func resolveMembers(t *testing.T, ph *binarytest.Server, reports []report) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), ph.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT subject, member_id FROM member_subjects WHERE issuer = $1`, jwksIssuer)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	var subject string
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&subject, &id}, func() error { ids[subject] = id; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range reports {
		var ok bool
		if reports[i].member, ok = ids[reports[i].subject]; !ok {
			t.Fatalf("no member for the subject %q after its report", reports[i].subject)
		}
	}
}
