package auth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/auth"
)

// A provider that hangs (accepts the connection, never answers) while a read of its keys is
// in flight does not hold up the tokens of the keys already read: they verify while that
// read still waits, without waiting for its timeout.
func TestKeys_HungProviderHoldsUpNoKnownKey(t *testing.T) {
	rs := newRSA(t, "rs")
	doc := must(json.Marshal(map[string]any{"keys": []json.RawMessage{rs.jwk(t)}}))
	var served atomic.Int64
	hung := make(chan struct{}) // a read is waiting in the handler
	release := make(chan struct{})
	var hungDone atomic.Bool // the hung handler has returned
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 1 {
			_, _ = w.Write(doc)
			return
		}
		defer hungDone.Store(true)
		select {
		case hung <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	metrics := auth.NewMetrics(prometheus.NewRegistry())
	keys := must(auth.NewKeySet(auth.KeysConfig{URL: srv.URL, Metrics: metrics}))
	if err := keys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keys.Stop(context.Background()) }()
	<-keys.Loaded()
	v := must(auth.New(auth.Config{Keys: keys, Issuer: testIssuer, Audience: testAudience, Subjects: &subjects{}, Metrics: metrics}))

	// A token of a kid never published makes the node read the keys again: that read hangs.
	unknown := make(chan error, 1)
	go func() {
		_, err := v.Verify(newRSA(t, "new").mint(t, "a", nil))
		unknown <- err
	}()
	<-hung
	if _, err := v.Verify(rs.mint(t, "b", nil)); err != nil {
		t.Fatalf("a token of a key already read, while a read hangs: %v", err)
	}
	if hungDone.Load() {
		t.Fatal("the known key's token verified only after the hung read ended")
	}
	release <- struct{}{}
	if err := <-unknown; err == nil {
		t.Fatal("the unknown kid's token was accepted")
	}
}
