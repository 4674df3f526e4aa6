package tus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
)

// answerLoser loses the answer to the next commit a connection of its pool sends, once armed:
// the commit reaches PostgreSQL and is done there, then the connection breaks before its
// answer is read, so the store cannot know the commit's outcome.
type answerLoser struct {
	armed, lost atomic.Int32
}

// pool returns a pool on dbURL whose connections go through l.
func (l *answerLoser) pool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &losingConn{Conn: conn, l: l}, nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// losingConn is a connection of an answerLoser's pool.
type losingConn struct {
	net.Conn
	l        *answerLoser
	dropping atomic.Bool
}

// commitQuery is pgx's commit, a simple-protocol query: 'Q', its length, the text.
var commitQuery = []byte("Q\x00\x00\x00\x0bcommit\x00")

func (c *losingConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, commitQuery) && c.l.armed.CompareAndSwap(1, 0) {
		c.dropping.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *losingConn) Read(p []byte) (int, error) {
	if c.dropping.CompareAndSwap(true, false) {
		_, _ = c.Conn.Read(p) // the commit's answer: it is done
		c.Conn.Close()
		c.l.lost.Add(1)
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(p)
}

// A tail piece's object goes when its row goes, and not before: the request that fills a part
// removes the objects of the pieces it read, a merge those of the pieces it replaced, and the
// object of a piece whose commit's answer was lost (done, as far as the store can tell, or not)
// stays, since its row may name it (it does here: the upload goes on from it to the right
// file). An object whose row went in a commit whose answer was lost goes when the upload
// finishes, which leaves only the source in its folder.
func TestUpload_PieceObjectsGoWithTheirRows(t *testing.T) {
	const row = tus.MaxRowBytes
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			loser := &answerLoser{}
			lossy := *c
			lossy.pool = loser.pool(t, c.dbURL)
			n := lossy.start(t, func(cfg *tus.Config) { tus.SetMaxTailPieces(cfg, 2) })
			file := randomFile(t, 2*partSize+100)
			path := n.create(t, 121, len(file), "")
			id := strings.TrimPrefix(path, tus.Base+"/")
			tails := func() []string { t.Helper(); return c.keys(t, "tus/"+id+"/tails/") }
			offset := 0
			patch := func(what string, to, status int) {
				t.Helper()
				if a := n.patch(t, 121, path, offset, file[offset:to]); a.status != status {
					t.Fatalf("%s: PATCH of %d bytes at %d: %d %s, want %d", what, to-offset, offset, a.status, a.body, status)
				}
				if got := n.offset(t, 121, path); got != to {
					t.Fatalf("%s: the offset is %d, want %d", what, got, to)
				}
				offset = to
			}
			patch("an object piece", row+1, http.StatusNoContent)
			first := tails()
			patch("a row piece", offset+10, http.StatusNoContent)
			patch("a merge of the three into an object", offset+10, http.StatusNoContent)
			if got := tails(); len(got) != 1 || slices.Equal(got, first) {
				t.Fatalf("after the merge the tail's objects are %q, want the merged piece's alone (the first was %q)", got, first)
			}
			patch("a part of the merged piece and more", partSize, http.StatusNoContent)
			if got := tails(); len(got) != 0 {
				t.Fatalf("after the part the tail's objects are %q, want none", got)
			}

			// Commits whose answers are lost: a piece's (its object stays), then a part's (the
			// objects of the pieces it read stay, their rows gone).
			loser.armed.Store(1)
			patch("an object piece whose commit's answer is lost", partSize+row+100, http.StatusInternalServerError)
			if got := tails(); len(got) != 1 {
				t.Fatalf("after the lost answer the tail's objects are %q, want the piece's", got)
			}
			loser.armed.Store(1)
			patch("a part whose commit's answer is lost", 2*partSize, http.StatusInternalServerError)
			if lost := loser.lost.Load(); lost != 2 {
				t.Fatalf("%d answers lost, want 2", lost)
			}
			if got := tails(); len(got) != 1 {
				t.Fatalf("after the part's lost answer the tail's objects are %q, want the piece's, left", got)
			}
			patch("the last bytes", len(file), http.StatusNoContent)
			source := sourceOf(t, c, 121)
			if sum, size := c.stored(t, source); sum != sha256.Sum256(file) {
				t.Errorf("the stored source (%d bytes) is not the file", size)
			}
			if got := c.keys(t, "tus/"+id+"/"); !slices.Equal(got, []string{source}) {
				t.Errorf("the finished upload's folder holds %q, want its source alone", got)
			}
		})
	}
}

// stoppingTransport carries a node's requests to S3 but, for each tail piece object, only the
// first: it answers the later ones 403 without sending them, as a node that stopped (or lost
// the store) once a piece's first request was sent sends nothing more for it, no abort either.
type stoppingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen map[string]bool
}

func (s *stoppingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/tails/") {
		s.mu.Lock()
		later := s.seen[req.URL.Path]
		s.seen[req.URL.Path] = true
		s.mu.Unlock()
		if later {
			if req.Body != nil {
				req.Body.Close()
			}
			return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/xml"}}, Request: req,
				Body: io.NopCloser(strings.NewReader(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>stopped</Message></Error>`))}, nil
		}
	}
	return s.base.RoundTrip(req)
}

// A tail piece object goes up to S3 in one request, so a node that stops while it writes one
// leaves nothing behind: no unfinished multipart write, which no object lists, and which the
// orphan sweep keeps for as long as the upload's folder is in use, forever once the upload is
// media. (Written as a stream of unknown size, a piece was a multipart write of three requests
// holding minio-go's 8 MiB part buffer: stopped after the first, it left an unfinished write
// under the finished upload's folder, there after the upload's expiry and the sweep.)
func TestUpload_PieceObjectIsOneWrite(t *testing.T) {
	t.Parallel()
	c := backends()["S3"](t)
	cfg := s3test.Shared(t).Config(c.bucket)
	cfg.Transport = &stoppingTransport{base: http.DefaultTransport.(*http.Transport).Clone(), seen: map[string]bool{}}
	st, err := storage.NewS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopping := c.start(t, func(cfg *tus.Config) { cfg.Objects = st })
	n := c.start(t)
	file := randomFile(t, partSize+tus.MaxRowBytes+10)
	path := n.create(t, 122, len(file), "")
	id := strings.TrimPrefix(path, tus.Base+"/")
	a := stopping.patch(t, 122, path, 0, file[:tus.MaxRowBytes+1])
	t.Logf("the piece object's PATCH through the stopping node: %d %s", a.status, a.body)
	offset := n.offset(t, 122, path)
	if a := n.patch(t, 122, path, offset, file[offset:]); a.status != http.StatusNoContent {
		t.Fatalf("the rest: %d %s", a.status, a.body)
	}
	if removed, err := c.expireNow(t); err != nil || removed != 1 {
		t.Fatalf("Expire: %d, %v; want the finished upload's row", removed, err)
	}
	sweeper, err := storage.NewSweeper(storage.SweepConfig{Store: c.objects, Rules: []storage.SweepRule{tus.OrphanRule(c.pool)},
		Now: func() time.Time { return time.Now().Add(48 * time.Hour) }}) // past any grace
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweeper.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := c.unfinished(t); len(left) != 0 {
		t.Errorf("after the upload's finish, expiry and the sweep, unfinished writes are left: %q", left)
	}
	source := sourceOf(t, c, 122)
	if got := c.keys(t, "tus/"+id+"/"); !slices.Equal(got, []string{source}) {
		t.Errorf("the upload's folder holds %q, want its source alone", got)
	}
	if sum, size := c.stored(t, source); sum != sha256.Sum256(file) {
		t.Errorf("the stored source (%d bytes) is not the file", size)
	}
}
