package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
)

// The key pair of an operator's backend: playhead token --key prints its public JWKS, which a
// node reads as PLAYHEAD_JWKS_FILE, and mints the tokens that node accepts, admin included.
func TestToken_WithKey(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, jwksFile := filepath.Join(dir, "backend.pem"), filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runToken([]string{"--key", keyFile, "--print-jwks"}, &strings.Builder{}); err == nil {
		t.Fatal("--print-jwks of a PEM key without --kid: no error")
	}
	var jwks strings.Builder
	if err := runToken([]string{"--key", keyFile, "--kid", "backend-2026", "--print-jwks"}, &jwks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jwksFile, []byte(jwks.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PLAYHEAD_OIDC_ADMIN_CLAIM", "roles")
	t.Setenv("PLAYHEAD_OIDC_ADMIN_VALUE", "playhead-admin")
	var tokens strings.Builder
	args := []string{"--key", keyFile, "--kid", "backend-2026", "--issuer", "https://backend.example/", "--audience", "playhead", "--subject", "viewer-", "--count", "3", "--admin", "--ttl", "1h"}
	if err := runToken(args, &tokens); err != nil {
		t.Fatal(err)
	}

	keys, err := auth.NewKeySet(auth.KeysConfig{File: jwksFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keys.Stop(context.Background()) }()
	<-keys.Loaded()
	v, err := auth.New(auth.Config{Keys: keys, Issuer: "https://backend.example/", Audience: "playhead", Subjects: numbered{},
		AdminClaim: "roles", AdminValue: "playhead-admin"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(tokens.String())
	if len(lines) != 3 {
		t.Fatalf("--count 3 printed %d tokens", len(lines))
	}
	for i, tok := range lines {
		id, err := v.Verify(tok)
		if err != nil || id.Subject != "viewer-"+string(rune('0'+i)) || !id.Admin || time.Until(id.Expires) > time.Hour {
			t.Fatalf("token %d: %+v, %v", i, id, err)
		}
	}
}

// numbered maps every subject to member 1: the test checks the token, not the mapping.
type numbered struct{}

func (numbered) Member(context.Context, string, string, time.Time) (int64, error) { return 1, nil }
