package tus_test

import (
	"crypto/sha256"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// An upload sent in three PATCHes of sizes that do not fall on part boundaries, each to
// another node, ends as POST /v1/media does: one media row (PROCESSING, the title and
// visibility of its metadata) and its encode job; the stored source holds the file's bytes,
// and nothing else is left (no tail, no unfinished write). HEAD then names the media.
func TestUpload_ResumedOnOtherNodesEndsAsMedia(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			a, b := c.start(t), c.start(t)
			file := randomFile(t, 2*partSize+12345)
			path := a.create(t, 7, len(file), metadata("filename", "Lecture 1.mp4", "visibility", "public"))
			if got := a.do(t, 7, http.MethodHead, path, nil, nil); got.header.Get("Upload-Expires") == "" || got.header.Get("Upload-Length") != strconv.Itoa(len(file)) {
				t.Errorf("HEAD of a new upload: Upload-Expires %q, Upload-Length %q", got.header.Get("Upload-Expires"), got.header.Get("Upload-Length"))
			}
			cuts := []int{3 << 20, 9 << 20, len(file)}
			offset := 0
			for i, cut := range cuts {
				n := []*node{a, b}[i%2]
				if got := n.offset(t, 7, path); got != offset {
					t.Fatalf("before PATCH %d the offset is %d, want %d", i, got, offset)
				}
				ans := n.patch(t, 7, path, offset, file[offset:cut])
				if ans.status != http.StatusNoContent || ans.header.Get("Upload-Offset") != strconv.Itoa(cut) {
					t.Fatalf("PATCH %d: %d Upload-Offset %q %s", i, ans.status, ans.header.Get("Upload-Offset"), ans.body)
				}
				offset = cut
			}
			head := b.do(t, 7, http.MethodHead, path, nil, nil)
			mediaID, _ := strconv.ParseInt(head.header.Get("Playhead-Media-Id"), 10, 64)
			if head.header.Get("Upload-Offset") != strconv.Itoa(len(file)) || mediaID <= 0 {
				t.Fatalf("HEAD after the last byte: offset %q, media %q", head.header.Get("Upload-Offset"), head.header.Get("Playhead-Media-Id"))
			}
			var title, status, visibility, source, jobKind string
			if err := c.pool.QueryRow(t.Context(), `
				SELECT m.title, m.status, m.visibility, m.source_key, j.kind FROM media m JOIN jobs j ON j.subject_id = m.id
				WHERE m.id = $1 AND m.owner_id = 7`, mediaID).Scan(&title, &status, &visibility, &source, &jobKind); err != nil {
				t.Fatal(err)
			}
			if title != "Lecture 1" || status != "PROCESSING" || visibility != "PUBLIC" || jobKind != "encode" {
				t.Errorf("media %q %s %s, job %q; want \"Lecture 1\" PROCESSING PUBLIC with an encode job", title, status, visibility, jobKind)
			}
			sum, size := c.stored(t, source)
			if sum != sha256.Sum256(file) || size != int64(len(file)) {
				t.Errorf("the stored source has %d bytes and another sha256 than the file's %d", size, len(file))
			}
			folder := strings.TrimSuffix(source, "source")
			if got := c.keys(t, folder); !slices.Equal(got, []string{source}) {
				t.Errorf("the upload's folder holds %q, want only its source", got)
			}
			if left := c.unfinished(t); len(left) != 0 {
				t.Errorf("unfinished writes left: %q", left)
			}
			if pieces := tailPieces(t, c, path); pieces != 0 {
				t.Errorf("%d tail pieces left", pieces)
			}
			if got := metricValue(t, a.metrics, "playhead_tus_bytes_received_total") + metricValue(t, b.metrics, "playhead_tus_bytes_received_total"); got != float64(len(file)) {
				t.Errorf("bytes received: %v, want %d", got, len(file))
			}
			if got := metricValue(t, a.metrics, "playhead_tus_uploads_finished_total") + metricValue(t, b.metrics, "playhead_tus_uploads_finished_total"); got != 1 {
				t.Errorf("finished uploads counted: %v, want 1", got)
			}
		})
	}
}

// A PATCH whose connection breaks off keeps every byte that arrived: HEAD gives the offset of
// the last byte the node read (here all that was sent, a part and a piece of the next), and the
// upload goes on from there to the right file.
func TestUpload_BrokenPatchKeepsWhatArrived(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			n := c.start(t)
			file := randomFile(t, 2*partSize+777)
			path := n.create(t, 8, len(file), metadata("filename", "a.mp4"))
			sent := partSize + 4321
			conn, _ := n.rawPatch(t, 8, path, 0, len(file), file[:sent])
			waitFor(t, "the node to store the bytes sent", func() bool {
				return metricValue(t, n.metrics, "playhead_tus_bytes_received_total") >= float64(partSize)
			})
			conn.Close() // the client's network goes away mid-body
			waitFor(t, "the broken PATCH's bytes to be stored", func() bool {
				return metricValue(t, n.metrics, "playhead_tus_bytes_received_total") == float64(sent)
			})
			if got := n.offset(t, 8, path); got != sent {
				t.Fatalf("after a PATCH broken off at byte %d the offset is %d", sent, got)
			}
			if ans := n.patch(t, 8, path, sent, file[sent:]); ans.status != http.StatusNoContent {
				t.Fatalf("the resumed PATCH: %d %s", ans.status, ans.body)
			}
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 8`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if sum, _ := c.stored(t, source); sum != sha256.Sum256(file) {
				t.Error("the stored source is not the file")
			}
		})
	}
}

// The bytes of a body cut mid-way arrive in TCP segments: any read may end anywhere, so the
// store must take whatever came, however small; a PATCH of 1 byte at a time works too.
func TestUpload_OneByteAtATime(t *testing.T) {
	c := backends()["Local"](t)
	n := c.start(t)
	file := []byte("tiny file, byte by byte")
	path := n.create(t, 9, len(file), "")
	for i := range file {
		if ans := n.patch(t, 9, path, i, file[i:i+1]); ans.status != http.StatusNoContent {
			t.Fatalf("PATCH of byte %d: %d %s", i, ans.status, ans.body)
		}
	}
	var source, title string
	if err := c.pool.QueryRow(t.Context(), `SELECT source_key, title FROM media WHERE owner_id = 9`).Scan(&source, &title); err != nil {
		t.Fatal(err)
	}
	r, err := c.objects.Open(t.Context(), source)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _ := io.ReadAll(r)
	if string(got) != string(file) || title != "untitled" {
		t.Errorf("stored %q titled %q, want the file titled untitled", got, title)
	}
}
