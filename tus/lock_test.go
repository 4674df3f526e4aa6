package tus_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
)

// patchAnswer reads the answer to a raw PATCH in the background.
func patchAnswer(r *bufio.Reader) <-chan int {
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodPatch})
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	return answered
}

// Two clients append to one upload at once, each through another node. The upload's lock is
// taken by one of them; the other is refused with 423 at once, while the first is still
// sending, and the stored file is the first client's, whole.
func TestUpload_TwoClientsAppendingAtOnce(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			nodes := []*node{c.start(t), c.start(t)}
			files := [][]byte{randomFile(t, partSize+5000), randomFile(t, partSize+5000)}
			path := nodes[0].create(t, 11, len(files[0]), "")
			var conns []net.Conn
			var answers []<-chan int
			for i, n := range nodes {
				conn, r := n.rawPatch(t, 11, path, 0, len(files[i]), files[i][:1<<20])
				conns, answers = append(conns, conn), append(answers, patchAnswer(r))
			}
			// The refused one answers first, while both are still sending: the holder waits for
			// the rest of its body. (With no lock, neither would answer before its body ends.)
			holder := -1
			select {
			case status := <-answers[0]:
				holder = 1
				if status != http.StatusLocked && status != http.StatusConflict {
					t.Fatalf("the first answer (client 0): %d, want 423 or 409", status)
				}
			case status := <-answers[1]:
				holder = 0
				if status != http.StatusLocked && status != http.StatusConflict {
					t.Fatalf("the first answer (client 1): %d, want 423 or 409", status)
				}
			}
			if _, err := conns[holder].Write(files[holder][1<<20:]); err != nil {
				t.Fatal(err)
			}
			if status := <-answers[holder]; status != http.StatusNoContent {
				t.Fatalf("the holder's PATCH: %d, want 204", status)
			}
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 11`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if sum, size := c.stored(t, source); sum != sha256.Sum256(files[holder]) {
				t.Errorf("the stored file (%d bytes) is not the holder's", size)
			}
		})
	}
}

// A client resuming after its connection died asks where the upload stands (HEAD), maybe on
// another node, while the node that served its PATCH still waits for more of that body (no
// reset reached it). The HEAD asks the holder to let go; the holder reads what is left in its
// socket (nothing more comes), stores what it received and unlocks, and the HEAD answers that
// offset. Without the release the HEAD would wait out its
// lock wait and answer 423.
func TestUpload_ResumeTakesTheUploadFromAStalePatch(t *testing.T) {
	for _, where := range []string{"same node", "other node"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			c := backends()["Local"](t)
			wait := func(cfg *tus.Config) { cfg.LockWait = 10 * time.Second }
			stale := c.start(t, wait)
			resumer := stale
			if where == "other node" {
				resumer = c.start(t, wait)
			}
			file := randomFile(t, 3*partSize)
			path := stale.create(t, 12, len(file), "")
			sent := partSize + 999
			_, r := stale.rawPatch(t, 12, path, 0, len(file), file[:sent])
			answered := patchAnswer(r)
			waitFor(t, "the first part to be stored", func() bool {
				return metricValue(t, stale.metrics, "playhead_tus_bytes_received_total") >= float64(partSize)
			})
			head := resumer.do(t, 12, http.MethodHead, path, nil, nil)
			if head.status != http.StatusOK || head.header.Get("Upload-Offset") != strconv.Itoa(sent) {
				t.Fatalf("HEAD while a stale PATCH holds the upload: %d offset %q, want 200 at %d", head.status, head.header.Get("Upload-Offset"), sent)
			}
			// It drained its body (nothing more came) and ended with what it had.
			if status := <-answered; status != http.StatusNoContent {
				t.Errorf("the stale PATCH was answered %d, want 204 (ended early, its bytes stored)", status)
			}
			if ans := resumer.patch(t, 12, path, sent, file[sent:]); ans.status != http.StatusNoContent {
				t.Fatalf("the resumed PATCH: %d %s", ans.status, ans.body)
			}
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 12`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if sum, _ := c.stored(t, source); sum != sha256.Sum256(file) {
				t.Error("the stored source is not the file")
			}
		})
	}
}

// gatedObjects holds the first PutPart (or, with tails, the first commit of bytes to a tail,
// through the node's hook: see configure) until gate is closed, telling entered when it
// waits: a node whose storage is slow while the rest of a body piles up in its socket.
type gatedObjects struct {
	tus.Objects
	tails   bool
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedObjects) wait() {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
}

func (g *gatedObjects) PutPart(ctx context.Context, key, id string, n int, r io.Reader, size int64) (storage.Part, error) {
	if !g.tails {
		g.wait()
	}
	return g.Objects.PutPart(ctx, key, id, n, r, size)
}

// configure makes a node's Config write through g and, with tails, wait before its first
// commit of bytes to a tail.
func (g *gatedObjects) configure(cfg *tus.Config) {
	cfg.Objects = g
	if g.tails {
		tus.BeforeTailWrite(cfg, g.wait)
	}
}

// The bytes already in a node's socket when a resuming client asks for the upload are kept:
// the node was storing a part (slowly) while the rest of the body arrived, the client's
// connection is gone, and the HEAD on another node asks for the lock. The holder reads what
// waits in its socket before it lets go, so the HEAD's offset is past those bytes and the
// client does not send them again. (Stopped at once, as tusd does by itself, the node was
// measured losing 12 MB of a cut upload to S3 in TestTus_ClientResumesAcrossNodesThroughCuts,
// and the client sent 1.13 × the file.)
func TestUpload_ReleaseKeepsTheBytesInTheSocket(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	c.released = make(chan string, 4)
	gated := &gatedObjects{Objects: c.objects, entered: make(chan struct{}), gate: make(chan struct{})}
	holder := c.start(t, func(cfg *tus.Config) { cfg.Objects = gated })
	resumer := c.start(t)
	file := randomFile(t, 2*partSize)
	path := holder.create(t, 13, len(file), "")
	sent := partSize + 100_000
	holder.rawPatch(t, 13, path, 0, len(file), file[:sent])
	<-gated.entered // the first part is being stored; the rest of what was sent waits in the socket
	offset := make(chan string, 1)
	go func() { offset <- resumer.do(t, 13, http.MethodHead, path, nil, nil).header.Get("Upload-Offset") }()
	<-c.released // the holder was asked to let go
	close(gated.gate)
	if got := <-offset; got != strconv.Itoa(sent) {
		t.Fatalf("HEAD after the holder let go: offset %s, want %d (every byte it had received)", got, sent)
	}
}

// A writer whose lock session dies mid-PATCH (PostgreSQL restarted, the connection cut) does
// not know it lost the lock, and writes on, while a resuming request on another node takes the
// lock and moves the upload forward past a part. The stale writer's part or tail (a row, or an
// object larger than a row) must not go into the upload: the file that ends as media is the
// client's, byte for byte, and the object of a tail that was not committed is removed.
func TestUpload_WriterThatLostItsLockCannotCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tails      bool
		sent, body int // what the stale writer has sent when it stores, and its whole body
	}{
		{"stored a part", false, partSize + 100, partSize + 200},
		{"stored a tail", true, 100, 100},
		{"stored a tail object", true, tus.MaxRowBytes + 100, tus.MaxRowBytes + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := backends()["Local"](t)
			gated := &gatedObjects{Objects: c.objects, tails: tc.tails, entered: make(chan struct{}), gate: make(chan struct{})}
			stale := c.start(t, gated.configure)
			resumer := c.start(t)
			file := randomFile(t, 2*partSize)
			path := stale.create(t, 14, len(file), "")
			conn, r := stale.rawPatch(t, 14, path, 0, tc.body, file[:tc.sent])
			answered := patchAnswer(r)
			<-gated.entered // the stale writer stores what it read
			var killed bool
			if err := c.pool.QueryRow(t.Context(), `
				SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
				t.Fatalf("terminate the stale writer's lock session: %v %v", killed, err)
			}
			// The lock is free: the resumer takes it and stores a part and a tail of its own.
			if got := resumer.offset(t, 14, path); got != 0 {
				t.Fatalf("HEAD on the resumer: offset %d, want 0", got)
			}
			if a := resumer.patch(t, 14, path, 0, file[:partSize+50]); a.status != http.StatusNoContent {
				t.Fatalf("the resumer's PATCH: %d %s", a.status, a.body)
			}
			close(gated.gate) // the stale writer goes on: its write, then the end of its body
			go func() { _, _ = conn.Write(file[tc.sent:tc.body]) }()
			if status := <-answered; status == http.StatusNoContent {
				t.Errorf("the stale writer's PATCH was answered 204: it wrote over the resumer's")
			}
			// The resumer's tail is 50 bytes, a row: no piece is an object.
			if got := c.keys(t, "tus/"+strings.TrimPrefix(path, tus.Base+"/")+"/tails/"); len(got) != 0 {
				t.Errorf("the stale writer's tail left objects: %q", got)
			}
			offset := resumer.offset(t, 14, path)
			if a := resumer.patch(t, 14, path, offset, file[offset:]); a.status != http.StatusNoContent {
				t.Fatalf("the last PATCH from %d: %d %s", offset, a.status, a.body)
			}
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 14`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if sum, size := c.stored(t, source); sum != sha256.Sum256(file) || size != int64(len(file)) {
				t.Errorf("the stored source has %d bytes and another sha256 than the file's %d", size, len(file))
			}
		})
	}
}

// A writer that lost its lock may store its part after the upload finished (the resumer sent
// the rest meanwhile): on local storage the part goes into the parts' folder beside the source,
// which the finish removed before and which the media's source keeps in use for the orphan
// sweep. The finished upload's expiry removes it: once the row is gone, the upload's folder
// holds its source alone, and the file is the client's.
func TestUpload_WriterThatLostItsLockAfterTheFinish(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			gated := &gatedObjects{Objects: c.objects, entered: make(chan struct{}), gate: make(chan struct{})}
			stale := c.start(t, gated.configure)
			resumer := c.start(t)
			file := randomFile(t, 2*partSize)
			path := resumer.create(t, 16, len(file), "")
			id := strings.TrimPrefix(path, tus.Base+"/")
			// The stale writer goes on when the test ends, failed or not: its node stops after.
			release := sync.OnceFunc(func() { close(gated.gate) })
			t.Cleanup(release)
			_, r := stale.rawPatch(t, 16, path, 0, partSize+3, file[:partSize+3])
			answered := patchAnswer(r)
			<-gated.entered // the stale writer stores its part
			if err := c.pool.QueryRow(t.Context(), `
				SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(new(bool)); err != nil {
				t.Fatalf("terminate the stale writer's lock session: %v", err)
			}
			// HEAD waits for the lock, free once the session is gone (a PATCH would be refused).
			if got := resumer.offset(t, 16, path); got != 0 {
				t.Fatalf("HEAD on the resumer: offset %d, want 0", got)
			}
			if a := resumer.patch(t, 16, path, 0, file); a.status != http.StatusNoContent || a.header.Get(tus.HeaderMediaID) == "" {
				t.Fatalf("the resumer's PATCH of the whole file: %d media %q %s", a.status, a.header.Get(tus.HeaderMediaID), a.body)
			}
			release()
			if status := <-answered; status == http.StatusNoContent {
				t.Errorf("the stale writer's PATCH was answered 204 after the upload finished")
			}
			if removed, err := c.expireNow(t); err != nil || removed != 1 {
				t.Fatalf("Expire: %d, %v; want the finished upload's row", removed, err)
			}
			source := sourceOf(t, c, 16)
			if got := c.keys(t, "tus/"+id+"/"); !slices.Equal(got, []string{source}) {
				t.Errorf("after the finished upload's expiry its folder holds %q, want its source alone", got)
			}
			if sum, size := c.stored(t, source); sum != sha256.Sum256(file) {
				t.Errorf("the stored source (%d bytes) is not the file", size)
			}
		})
	}
}
