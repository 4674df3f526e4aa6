package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// KeyClaims is what MintWithKey signs: the claims a provider's token carries.
type KeyClaims struct {
	Issuer, Audience, Subject string
	TTL                       time.Duration
	// Extra claims (a roles array, a scope) merged into the body.
	Extra map[string]any
}

// MintWithKey signs a token with a private key, the way a backend holding its own key pair (the
// JWKS file mode) or a provider does: kid in the header, the algorithm from the key (RS256,
// ES256 on P-256, EdDSA).
func MintWithKey(key crypto.Signer, kid string, c KeyClaims) (string, error) {
	method, err := signingMethod(key)
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims := jwt.MapClaims{}
	for k, v := range c.Extra {
		claims[k] = v
	}
	claims["iss"], claims["sub"], claims["aud"] = c.Issuer, c.Subject, c.Audience
	claims["iat"], claims["exp"] = now.Unix(), now.Add(c.TTL).Unix()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	return tok.SignedString(key)
}

func signingMethod(key crypto.Signer) (jwt.SigningMethod, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return jwt.SigningMethodRS256, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("an EC key must be on P-256 (ES256)")
		}
		return jwt.SigningMethodES256, nil
	case ed25519.PrivateKey:
		return jwt.SigningMethodEdDSA, nil
	default:
		return nil, fmt.Errorf("a %T cannot sign tokens: use RSA, EC P-256 or Ed25519", key)
	}
}

// ParsePrivateKey reads a private key from a JWK (returning its kid) or from PEM (PKCS #8,
// PKCS #1 or SEC 1; the kid is then "").
func ParsePrivateKey(data []byte) (crypto.Signer, string, error) {
	if block, _ := pem.Decode(data); block != nil {
		var key any
		var err error
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return nil, "", fmt.Errorf("PEM private key: %w", err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, "", fmt.Errorf("PEM holds a %T, not a private key", key)
		}
		return signer, "", nil
	}
	jwk, err := jwkset.NewJWKFromRawJSON(data, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("neither PEM nor a JWK: %w", err)
	}
	signer, ok := jwk.Key().(crypto.Signer)
	if !ok || jwk.Marshal().D == "" {
		return nil, "", errors.New("the JWK is not a private key")
	}
	return signer, jwk.Marshal().KID, nil
}

// PublicJWKS returns a JWKS document holding the public half of key under kid, with its alg:
// what a JWKS file or URL publishes for tokens MintWithKey signs.
func PublicJWKS(key crypto.Signer, kid string) ([]byte, error) {
	method, err := signingMethod(key)
	if err != nil {
		return nil, err
	}
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.ALG(method.Alg()), USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}}, "", "  ")
}
