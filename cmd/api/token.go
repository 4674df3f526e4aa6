package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/playhead/playhead/auth"
)

// runToken mints tokens. Without --key, HS256 tokens with PLAYHEAD_JWT_SECRET for member ids:
// with --count N it prints N tokens, one per line, for members --member … --member+N-1 (the
// token file a load test reads). With --key, tokens signed by a private key the way a backend
// holding its own key pair mints them (the JWKS file mode), for --subject (with --count N:
// --subject followed by 0 … N-1); --print-jwks prints the key's public JWKS instead, the file
// or URL body Playhead reads.
func runToken(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	member := fs.Int64("member", 0, "member id (the token's subject); required without --key")
	admin := fs.Bool("admin", false, "include the admin role (with --key: PLAYHEAD_OIDC_ADMIN_CLAIM holding PLAYHEAD_OIDC_ADMIN_VALUE)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime of the token")
	count := fs.Int("count", 1, "mint this many tokens for consecutive members or subjects, one per line")
	keyFile := fs.String("key", "", "a private key (JWK, or PEM: PKCS #8, PKCS #1, SEC 1) to sign with instead of the secret")
	kid := fs.String("kid", "", "the key id (with --key; default the JWK's kid)")
	issuer := fs.String("issuer", os.Getenv("PLAYHEAD_OIDC_ISSUER"), "the token's iss (with --key)")
	audience := fs.String("audience", os.Getenv("PLAYHEAD_OIDC_AUDIENCE"), "the token's aud (with --key)")
	subject := fs.String("subject", "", "the token's sub (with --key); with --count, a prefix")
	printJWKS := fs.Bool("print-jwks", false, "print the public JWKS of --key and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *ttl <= 0:
		return errors.New("--ttl must be positive")
	case *count < 1:
		return errors.New("--count must be at least 1")
	}
	if *keyFile != "" {
		return mintWithKey(out, keyTokens{file: *keyFile, kid: *kid, issuer: *issuer, audience: *audience,
			subject: *subject, admin: *admin, ttl: *ttl, count: *count, printJWKS: *printJWKS})
	}
	if *member <= 0 {
		return errors.New("--member must be a positive member id (or sign with --key)")
	}
	secret := os.Getenv("PLAYHEAD_JWT_SECRET")
	if len(secret) < auth.MinSecretBytes {
		return fmt.Errorf("PLAYHEAD_JWT_SECRET must be set to at least %d bytes", auth.MinSecretBytes)
	}
	for i := range int64(*count) {
		tok, err := auth.Mint([]byte(secret), *member+i, *admin, *ttl)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, tok); err != nil {
			return err
		}
	}
	return nil
}

type keyTokens struct {
	file, kid, issuer, audience, subject string
	admin, printJWKS                     bool
	ttl                                  time.Duration
	count                                int
}

func mintWithKey(out io.Writer, t keyTokens) error {
	data, err := os.ReadFile(t.file)
	if err != nil {
		return err
	}
	key, jwkKID, err := auth.ParsePrivateKey(data)
	if err != nil {
		return fmt.Errorf("--key %s: %w", t.file, err)
	}
	if t.kid == "" {
		t.kid = jwkKID
	}
	if t.kid == "" {
		return errors.New("--kid is required with a PEM key (a JWK names its own)")
	}
	if t.printJWKS {
		doc, err := auth.PublicJWKS(key, t.kid)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", doc)
		return err
	}
	switch {
	case t.issuer == "":
		return errors.New("--issuer (or PLAYHEAD_OIDC_ISSUER) is required with --key")
	case t.audience == "":
		return errors.New("--audience (or PLAYHEAD_OIDC_AUDIENCE) is required with --key")
	case t.subject == "":
		return errors.New("--subject is required with --key")
	}
	claims := auth.KeyClaims{Issuer: t.issuer, Audience: t.audience, TTL: t.ttl}
	if t.admin {
		name, value := os.Getenv("PLAYHEAD_OIDC_ADMIN_CLAIM"), os.Getenv("PLAYHEAD_OIDC_ADMIN_VALUE")
		if name == "" || value == "" {
			return errors.New("--admin with --key needs PLAYHEAD_OIDC_ADMIN_CLAIM and PLAYHEAD_OIDC_ADMIN_VALUE")
		}
		claims.Extra = map[string]any{name: []string{value}}
	}
	for i := range t.count {
		claims.Subject = t.subject
		if t.count > 1 {
			claims.Subject += strconv.Itoa(i)
		}
		tok, err := auth.MintWithKey(key, t.kid, claims)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, tok); err != nil {
			return err
		}
	}
	return nil
}
