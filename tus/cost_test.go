package tus_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/playhead/playhead/storage"
	"github.com/playhead/playhead/tus"
)

// countingObjects counts the bytes a node reads from and writes to its object store. The
// completion of an upload's parts into its source (CompleteParts: in the store on S3, a copy
// of the file on Local, once per upload when its last byte arrives) is not counted: the tests
// that count never finish their uploads.
type countingObjects struct {
	tus.Objects
	read, written atomic.Int64
	// puts counts the objects written (Put): tail pieces larger than a row.
	puts atomic.Int64
}

func (c *countingObjects) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	n, err := c.Objects.Put(ctx, key, r)
	c.written.Add(n)
	c.puts.Add(1)
	return n, err
}

func (c *countingObjects) PutPart(ctx context.Context, key, id string, n int, r io.Reader, size int64) (storage.Part, error) {
	p, err := c.Objects.PutPart(ctx, key, id, n, r, size)
	if err == nil {
		c.written.Add(size)
	}
	return p, err
}

func (c *countingObjects) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	r, err := c.Objects.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: r, n: &c.read}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// cost is what a node's requests have read and written: object store and tail pieces
// (PostgreSQL) together.
type cost struct{ read, written int64 }

func (c cost) minus(o cost) cost { return cost{c.read - o.read, c.written - o.written} }

// meter reads a node's cost so far.
type meter struct {
	objects *countingObjects
	node    *node
}

func (m meter) now(t *testing.T) cost {
	t.Helper()
	return cost{
		read:    m.objects.read.Load() + int64(metricValue(t, m.node.metrics, "playhead_tus_tail_bytes_read_total")),
		written: m.objects.written.Load() + int64(metricValue(t, m.node.metrics, "playhead_tus_tail_bytes_written_total")),
	}
}

// costBound checks an upload's cost after its k-th PATCH, all of them having sent sent bytes:
// at most sent read and 2 × sent written (each byte once as a piece of the tail, then once
// in a part, which reads the piece once), plus slack a request.
func costBound(t *testing.T, what string, k int, sent int64, total cost, slack int64) {
	t.Helper()
	if total.read > sent+int64(k)*slack || total.written > 2*sent+int64(k)*slack {
		t.Fatalf("%s: after %d PATCHes that sent %d bytes the upload's requests read %d and wrote %d bytes; want at most %d read and %d written (1× and 2× what was sent, plus %d a request)",
			what, k, sent, total.read, total.written, sent+int64(k)*slack, 2*sent+int64(k)*slack, slack)
	}
}

// mib writes n bytes as bytes and MiB.
func mib(n int64) string { return fmt.Sprintf("%d B (%.2f MiB)", n, float64(n)/(1<<20)) }

// No write amplification: the bytes a PATCH reads and writes are proportional to the bytes it
// sends, with parts of 8 MiB as in production, on local storage and S3. An upload gets a first
// PATCH of a part less 200 bytes (its tail), then PATCHes of 1 B, 1 KiB or 1 MiB that go past
// the part's end; or a first PATCH of a part less a byte, then by turns the byte that fills the
// part and a part less a byte again (tail pieces that are objects). After every PATCH, the
// upload's requests together (the first one too) have read at most what they sent and written
// at most twice that, plus a constant a request: a byte is written once in the tail, read once
// and written once in the part. (With the tail one object that each request reads and writes
// again whole, the second PATCH of 1 byte has read 16 MiB for 8 MiB and 2 bytes sent.) The log
// states the bytes of each PATCH: what most of them cost, the one that cost most, and the
// totals.
func TestUpload_PatchCostIsProportionalToItsBytes(t *testing.T) {
	const part = 8 << 20
	// The constant a request may cost beyond 2× its bytes: a merge of the tail, once in more
	// than a thousand requests, could cost some 8 KiB each way per request on average (none
	// comes here: a sequence stays below the bound on pieces).
	const slack = 16 << 10
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			counted := &countingObjects{Objects: c.objects}
			n := c.start(t, func(cfg *tus.Config) { cfg.Objects, cfg.PartSize = counted, part })
			m := meter{objects: counted, node: n}
			for _, tc := range []struct {
				name  string
				first int
				sizes []int
			}{
				{"1 B", part - 200, slices.Repeat([]int{1}, 400)},
				{"1 KiB", part - 200, slices.Repeat([]int{1 << 10}, 100)},
				{"1 MiB", part - 200, slices.Repeat([]int{1 << 20}, 20)},
				{"1 B and 8 MiB - 1 B by turns", part - 1, slices.Repeat([]int{1, part - 1}, 6)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					sum := tc.first
					for _, size := range tc.sizes {
						sum += size
					}
					file := randomFile(t, sum)
					// One byte more than is sent: the upload never ends (its completion is no PATCH's cost).
					path := n.create(t, 101, len(file)+1, "")
					start := m.now(t)
					var sent int64
					patch := func(size int) cost {
						t.Helper()
						before := m.now(t)
						if a := n.patch(t, 101, path, int(sent), file[sent:sent+int64(size)]); a.status != http.StatusNoContent {
							t.Fatalf("PATCH of %d bytes at %d: %d %s", size, sent, a.status, a.body)
						}
						sent += int64(size)
						return m.now(t).minus(before)
					}
					setup := patch(tc.first)
					costBound(t, name+" "+tc.name, 1, sent, m.now(t).minus(start), slack)
					var reads, writes []int64
					var most cost
					for i, size := range tc.sizes {
						one := patch(size)
						reads, writes = append(reads, one.read), append(writes, one.written)
						if one.read+one.written > most.read+most.written {
							most = one
						}
						costBound(t, name+" "+tc.name, i+2, sent, m.now(t).minus(start), slack)
					}
					total := m.now(t).minus(start)
					slices.Sort(reads)
					slices.Sort(writes)
					t.Logf("%s, PATCHes of %s: a first PATCH of %s read %d B and wrote %s; then %d PATCHes: each read %d B and wrote %d B (median), the costliest read %s and wrote %s; all %d PATCHes: sent %s, read %s (%.3f×), wrote %s (%.3f×)",
						name, tc.name, mib(int64(tc.first)), setup.read, mib(setup.written), len(tc.sizes), reads[len(reads)/2], writes[len(writes)/2],
						mib(most.read), mib(most.written), len(tc.sizes)+1, mib(sent), mib(total.read), float64(total.read)/float64(sent),
						mib(total.written), float64(total.written)/float64(sent))
				})
			}
		})
	}
}

// tailPieces counts the tail pieces of the upload at path.
func tailPieces(t *testing.T, c *cluster, path string) int {
	t.Helper()
	var n int
	if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM upload_tail_pieces WHERE upload_id = $1`,
		strings.TrimPrefix(path, tus.Base+"/")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sourceOf returns the source key of member's media (it has one).
func sourceOf(t *testing.T, c *cluster, member int64) string {
	t.Helper()
	var source string
	if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = $1`, member).Scan(&source); err != nil {
		t.Fatal(err)
	}
	return source
}

// An upload's tail stays within its bound of rows however small the PATCHes: the request that
// would pass it merges the tail and its bytes into one piece (here an object), which costs at
// most a part's bytes each way once in (bound - 1) requests; the file that ends as media is the
// client's, byte for byte.
func TestUpload_TailPiecesStayBounded(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	const maxPieces = 16
	counted := &countingObjects{Objects: c.objects}
	n := c.start(t, func(cfg *tus.Config) {
		cfg.Objects = counted
		tus.SetMaxTailPieces(cfg, maxPieces)
	})
	m := meter{objects: counted, node: n}
	// Between two merges at least maxPieces - 1 requests add a piece each, and a merge reads and
	// writes less than a part.
	slack := int64(partSize / (maxPieces - 1))
	file := randomFile(t, partSize+1000)
	path := n.create(t, 102, len(file), "")
	start := m.now(t)
	cuts := []int{partSize - 100}
	for cut := partSize - 99; cut <= partSize+50; cut++ {
		cuts = append(cuts, cut) // PATCHes of 1 byte, past the end of the part
	}
	offset := 0
	for i, cut := range cuts {
		if a := n.patch(t, 102, path, offset, file[offset:cut]); a.status != http.StatusNoContent {
			t.Fatalf("PATCH %d, to byte %d: %d %s", i, cut, a.status, a.body)
		}
		offset = cut
		if pieces := tailPieces(t, c, path); pieces > maxPieces {
			t.Fatalf("after PATCH %d the tail has %d pieces, more than its bound of %d", i, pieces, maxPieces)
		}
		costBound(t, "1-byte PATCHes merged", i+1, int64(offset), m.now(t).minus(start), slack)
	}
	// The first PATCH's tail is one object; each merge writes another.
	if puts := counted.puts.Load(); puts < 2 {
		t.Fatalf("%d tail objects written: no merge happened", puts)
	}
	if a := n.patch(t, 102, path, offset, file[offset:]); a.status != http.StatusNoContent || a.header.Get(tus.HeaderMediaID) == "" {
		t.Fatalf("the last PATCH: %d media %q %s", a.status, a.header.Get(tus.HeaderMediaID), a.body)
	}
	if sum, size := c.stored(t, sourceOf(t, c, 102)); sum != sha256.Sum256(file) {
		t.Errorf("the stored source (%d bytes) is not the file", size)
	}
	if pieces := tailPieces(t, c, path); pieces != 0 {
		t.Errorf("the finished upload left %d tail pieces", pieces)
	}
}

// An upload whose tail an earlier version stored as one object (tail_key) goes on: the next
// request reads the object once, into pieces or into a part, and removes it.
func TestUpload_EarlierTailObjectIsTakenOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		next int // the bytes of the request after the tail object
	}{
		{"into pieces", 1},
		{"into a part", partSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := backends()["Local"](t)
			n := c.start(t)
			file := randomFile(t, partSize+5000)
			path := n.create(t, 103, len(file), "")
			id := strings.TrimPrefix(path, tus.Base+"/")
			const tail = 3000
			// The earlier version's state: its tail object and the row that names it.
			key := "tus/" + id + "/tails/earlier"
			if _, err := c.objects.Put(t.Context(), key, strings.NewReader(string(file[:tail]))); err != nil {
				t.Fatal(err)
			}
			if _, err := c.pool.Exec(t.Context(), `UPDATE uploads SET upload_offset = $2, tail_key = $3, tail_size = $2 WHERE id = $1`,
				id, tail, key); err != nil {
				t.Fatal(err)
			}
			cut := min(tail+tc.next, len(file)-1)
			if a := n.patch(t, 103, path, tail, file[tail:cut]); a.status != http.StatusNoContent {
				t.Fatalf("PATCH after the tail object: %d %s", a.status, a.body)
			}
			if got := c.keys(t, "tus/"+id+"/tails/"); len(got) != 0 {
				t.Errorf("the tail object is still there: %q", got)
			}
			if a := n.patch(t, 103, path, cut, file[cut:]); a.status != http.StatusNoContent {
				t.Fatalf("the last PATCH: %d %s", a.status, a.body)
			}
			if sum, size := c.stored(t, sourceOf(t, c, 103)); sum != sha256.Sum256(file) {
				t.Errorf("the stored source (%d bytes) is not the file", size)
			}
		})
	}
}
