package media_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// hungS3 is an S3 endpoint that answers the first request (the bucket check at start-up) and
// then accepts connections and reads requests but never answers: a store that hangs mid-run
// (a stuck load balancer, a paused server). The S3 client is the real one.
func hungS3(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	answered := false
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			first := !answered
			answered = true
			mu.Unlock()
			go func() {
				r := bufio.NewReader(conn)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				if first && req.Method == http.MethodHead {
					fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
				// Every later request is read and never answered.
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestObjects_HungStoreAnswers503: when the object store stops answering mid-run, a player's
// playlist request is answered 503 with a JSON error once the handler's store time limit has
// passed, instead of hanging for the S3 client's retries (ten attempts of a minute's wait for
// headers each: about 10 minutes per request, measured 25 s with a 2 s header timeout). The
// client's 30 s read deadline is the failure deadline; the handler's limit is 1 s here.
func TestObjects_HungStoreAnswers503(t *testing.T) {
	st, err := storage.NewS3(context.Background(), storage.S3Config{
		Endpoint: hungS3(t), Bucket: "playhead", AccessKeyID: "id", SecretAccessKey: "secret-key-never-shown", PathStyle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := pgtest.Pool(t)
	m := must(media.NewStore(pool).Create(context.Background(), media.Media{OwnerID: 1, Title: "clip", DurationMS: 4000,
		Status: media.StatusReady, Visibility: media.VisibilityPrivate}))(t)
	links := &media.Links{Signer: must(media.NewSigner([]byte(secret)))(t), TTL: time.Minute}
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	(&media.ObjectsHandler{Store: st, Access: startCache(t, cache.Config{Load: media.NewStore(pool).LookupAccess}), Links: links,
		StoreTimeout: time.Second}).Register(app)
	addr := serveApp(t, app)

	for _, key := range []string{fmt.Sprintf("hls/%d/tok/master.m3u8", m.ID), fmt.Sprintf("hls/%d/tok/v0/seg_000.ts", m.ID)} {
		status, header, body := rawGet(t, addr, links.Signer.URL(1, key, time.Now().Add(time.Minute)), nil)
		var e struct {
			Error string `json:"error"`
		}
		if status != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("GET %s from a hung store: %d %q, want 503 with a JSON error", key, status, body)
		}
		if header.Get("Retry-After") == "" {
			t.Errorf("GET %s from a hung store: no Retry-After", key)
		}
		if strings.Contains(string(body), "secret-key-never-shown") || strings.Contains(string(body), "127.0.0.1") {
			t.Errorf("the answer %q names the store or its credentials", body)
		}
	}
}
