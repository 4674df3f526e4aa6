package tus_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/ratelimit"
	"github.com/playhead/playhead/tus"
)

// wantError checks a refused request: its status, and a JSON {"error": …} body saying
// something (HEAD answers have no body).
func wantError(t *testing.T, what string, a answer, statuses ...int) {
	t.Helper()
	if !slices.Contains(statuses, a.status) {
		t.Errorf("%s: %d %s, want %v", what, a.status, a.body, statuses)
		return
	}
	if a.body == "" {
		return
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(a.body), &e) != nil || e.Error == "" {
		t.Errorf("%s: %d with a body that is not JSON {\"error\": …}: %q", what, a.status, a.body)
	}
}

// The creation's limits and the metadata's rules: each refusal is a clear 4xx and creates
// nothing.
func TestCreate_Refused(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t, func(cfg *tus.Config) { cfg.MaxBytes = 1 << 20 })
	create := func(header map[string]string) answer {
		return n.do(t, 21, http.MethodPost, "/v1/uploads", header, nil)
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   []int
	}{
		{"over the size limit", map[string]string{"Upload-Length": strconv.Itoa(1<<20 + 1)}, []int{413}},
		{"huge length", map[string]string{"Upload-Length": "99999999999999999999"}, []int{400}},
		{"negative length", map[string]string{"Upload-Length": "-1"}, []int{400}},
		{"no length", map[string]string{}, []int{400}},
		{"empty file", map[string]string{"Upload-Length": "0"}, []int{422}},
		{"length deferred", map[string]string{"Upload-Defer-Length": "1"}, []int{400}},
		{"concatenation", map[string]string{"Upload-Length": "10", "Upload-Concat": "partial"}, []int{400}},
		{"metadata not base64", map[string]string{"Upload-Length": "10", "Upload-Metadata": "title !!!notbase64"}, []int{400}},
		{"metadata of three words", map[string]string{"Upload-Length": "10", "Upload-Metadata": "title dGl0bGU= x"}, []int{400}},
		{"metadata key twice", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("title", "a", "title", "b")}, []int{400}},
		{"metadata NUL", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("title", "a\x00b")}, []int{422}},
		{"metadata NUL in a file name", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("filename", "a\x00.mp4")}, []int{422}},
		{"metadata not UTF-8", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("title", "\xff\xfe")}, []int{422}},
		{"metadata escape codes", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("title", "\x1b[2J")}, []int{422}},
		{"title too long", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("title", strings.Repeat("t", 501))}, []int{422}},
		{"visibility unknown", map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("visibility", "FRIENDS")}, []int{422}},
		{"no Tus-Resumable", map[string]string{"Upload-Length": "10", "Tus-Resumable": ""}, []int{412}},
	} {
		wantError(t, tc.name, create(tc.header), tc.want...)
	}
	var rows int
	if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM uploads`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("refused creations left %d uploads (%v)", rows, err)
	}
	if got := c.keys(t, ""); len(got) != 0 {
		t.Errorf("refused creations left objects: %q", got)
	}
	ok := create(map[string]string{"Upload-Length": "10", "Upload-Metadata": metadata("filename", "clip.mp4", "filetype", "video/mp4")})
	if ok.status != http.StatusCreated || ok.header.Get("Upload-Expires") == "" {
		t.Errorf("a good creation: %d %s Upload-Expires %q", ok.status, ok.body, ok.header.Get("Upload-Expires"))
	}
	options := n.do(t, 21, http.MethodOptions, "/v1/uploads", nil, nil)
	if options.status != http.StatusOK || options.header.Get("Tus-Max-Size") != strconv.Itoa(1<<20) ||
		options.header.Get("Tus-Extension") != "creation,creation-with-upload,termination,expiration" {
		t.Errorf("OPTIONS: %d Tus-Max-Size %q Tus-Extension %q", options.status, options.header.Get("Tus-Max-Size"), options.header.Get("Tus-Extension"))
	}
}

// A member has at most UnfinishedPerMember unfinished uploads: one more is refused 429, and a
// terminated or finished one frees its place.
func TestCreate_UnfinishedPerMember(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t, func(cfg *tus.Config) { cfg.UnfinishedPerMember = 2 })
	first := n.create(t, 22, 10, "")
	second := n.create(t, 22, 3, "")
	wantError(t, "a third unfinished upload", n.do(t, 22, http.MethodPost, "/v1/uploads", map[string]string{"Upload-Length": "10"}, nil), 429)
	n.create(t, 23, 10, "") // another member has room
	if a := n.do(t, 22, http.MethodDelete, first, nil, nil); a.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", a.status, a.body)
	}
	if a := n.patch(t, 22, second, 0, []byte("abc")); a.status != http.StatusNoContent {
		t.Fatalf("finishing the second: %d %s", a.status, a.body)
	}
	n.create(t, 22, 10, "")
	n.create(t, 22, 10, "")
}

// A member's requests that change uploads (POST, PATCH, DELETE) are rate-limited: past the
// burst each is refused 429 with Retry-After and a JSON error, and counted, while another
// member's requests and the member's HEADs (a resuming client's question) go on. A request
// refused by its id alone (404) takes nothing from the limit and is answered 404 beyond it.
func TestUpload_RateLimitPerMember(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	// A rate far below what a test's requests take to send: no request of it comes back.
	n := c.start(t, func(cfg *tus.Config) { cfg.RateLimit = ratelimit.New(1e-6, 3) })
	path := n.create(t, 24, 10, "")
	wantError(t, "PATCH /v1/uploads/x", n.patch(t, 24, "/v1/uploads/x", 0, []byte("x")), 404)
	if a := n.patch(t, 24, path, 0, []byte("01234")); a.status != http.StatusNoContent {
		t.Fatalf("PATCH within the burst: %d %s", a.status, a.body)
	}
	other := n.create(t, 24, 10, "") // the third
	for _, tc := range []struct {
		what string
		a    answer
	}{
		{"POST", n.do(t, 24, http.MethodPost, "/v1/uploads", map[string]string{"Upload-Length": "10"}, nil)},
		{"PATCH", n.patch(t, 24, path, 5, []byte("56789"))},
		{"DELETE", n.do(t, 24, http.MethodDelete, other, nil, nil)},
	} {
		wantError(t, tc.what+" past the rate limit", tc.a, 429)
		if tc.a.status == http.StatusTooManyRequests && tc.a.header.Get("Retry-After") == "" {
			t.Errorf("%s past the rate limit: 429 without Retry-After", tc.what)
		}
	}
	wantError(t, "PATCH /v1/uploads/x past the rate limit", n.patch(t, 24, "/v1/uploads/x", 0, []byte("x")), 404)
	if got := n.offset(t, 24, path); got != 5 {
		t.Errorf("HEAD past the rate limit: offset %d, want 5", got)
	}
	n.create(t, 25, 10, "") // another member
	if got := metricValue(t, n.metrics, "playhead_tus_rate_limited_total"); got != 3 {
		t.Errorf("rate-limited requests counted: %v, want 3", got)
	}
}

// Another member's upload is as missing as one that never existed, for every method, and is
// left as it was; offsets that do not match answer 409; a body of another type 415; a body
// longer than the upload 413.
func TestUpload_RefusedRequests(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t)
	path := n.create(t, 31, 100, metadata("title", "mine"))
	if a := n.patch(t, 31, path, 0, []byte("0123456789")); a.status != http.StatusNoContent {
		t.Fatalf("PATCH: %d %s", a.status, a.body)
	}
	wantError(t, "HEAD of another member's upload", n.do(t, 32, http.MethodHead, path, nil, nil), 404)
	wantError(t, "PATCH of another member's upload", n.patch(t, 32, path, 10, []byte("x")), 404)
	wantError(t, "DELETE of another member's upload", n.do(t, 32, http.MethodDelete, path, nil, nil), 404)
	for _, bad := range []string{"/v1/uploads/0123456789abcdef0123456789abcdef", "/v1/uploads/..%2f..%2fetc", "/v1/uploads/x", "/v1/uploads/%00"} {
		wantError(t, "HEAD "+bad, n.do(t, 31, http.MethodHead, bad, nil, nil), 404)
		wantError(t, "PATCH "+bad, n.patch(t, 31, bad, 0, []byte("x")), 404)
	}
	if got := n.offset(t, 31, path); got != 10 {
		t.Fatalf("after another member's requests the offset is %d, want 10", got)
	}
	wantError(t, "PATCH at a past offset", n.patch(t, 31, path, 0, []byte("again")), 409)
	wantError(t, "PATCH at a future offset", n.patch(t, 31, path, 50, []byte("gap")), 409)
	wantError(t, "PATCH with a negative offset", n.patch(t, 31, path, -1, []byte("x")), 400)
	for _, offset := range []string{"+10", "1 0", "0x0a", "10.0", "", "00000000000000000010"} {
		// The protocol's offset is digits; tusd took what strconv.ParseInt takes ("+10").
		wantError(t, "PATCH with Upload-Offset "+strconv.Quote(offset), n.do(t, 31, http.MethodPatch, path,
			map[string]string{"Upload-Offset": offset, "Content-Type": "application/offset+octet-stream"}, []byte("x")), 400)
	}
	wantError(t, "PATCH of another type", n.do(t, 31, http.MethodPatch, path,
		map[string]string{"Upload-Offset": "10", "Content-Type": "application/json"}, []byte(`{}`)), 415)
	wantError(t, "PATCH past the upload's length", n.patch(t, 31, path, 10, make([]byte, 91)), 413)
	wantError(t, "PATCH without Tus-Resumable", n.do(t, 31, http.MethodPatch, path,
		map[string]string{"Upload-Offset": "10", "Content-Type": "application/offset+octet-stream", "Tus-Resumable": ""}, []byte("x")), 412)
	if got := n.offset(t, 31, path); got != 10 {
		t.Errorf("after the refused PATCHes the offset is %d, want 10", got)
	}
}

// A terminated upload is gone with its bytes; a finished one is media and cannot be
// terminated (409).
func TestUpload_Termination(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			n := c.start(t)
			file := randomFile(t, partSize+tus.MaxRowBytes+10)
			path := n.create(t, 41, len(file), "")
			// A part, and a tail of two pieces: a row and an object.
			for _, cut := range [][2]int{{0, partSize + 5}, {partSize + 5, partSize + tus.MaxRowBytes + 6}} {
				if a := n.patch(t, 41, path, cut[0], file[cut[0]:cut[1]]); a.status != http.StatusNoContent {
					t.Fatalf("PATCH: %d %s", a.status, a.body)
				}
			}
			if pieces, objects := tailPieces(t, c, path), c.keys(t, "tus/"+strings.TrimPrefix(path, tus.Base+"/")+"/tails/"); pieces != 2 || len(objects) != 1 {
				t.Fatalf("before the DELETE the tail has %d pieces and objects %q, want 2 pieces, 1 an object", pieces, objects)
			}
			if a := n.do(t, 41, http.MethodDelete, path, nil, nil); a.status != http.StatusNoContent {
				t.Fatalf("DELETE: %d %s", a.status, a.body)
			}
			wantError(t, "HEAD of a terminated upload", n.do(t, 41, http.MethodHead, path, nil, nil), 404)
			if got, left := c.keys(t, "tus/"), c.unfinished(t); len(got) != 0 || len(left) != 0 {
				t.Errorf("a terminated upload left objects %q and unfinished writes %q", got, left)
			}
			if pieces := tailPieces(t, c, path); pieces != 0 {
				t.Errorf("a terminated upload left %d tail pieces", pieces)
			}
			done := n.create(t, 41, 3, "")
			if a := n.patch(t, 41, done, 0, []byte("abc")); a.status != http.StatusNoContent {
				t.Fatalf("PATCH: %d %s", a.status, a.body)
			}
			wantError(t, "DELETE of a finished upload", n.do(t, 41, http.MethodDelete, done, nil, nil), 409)
			if a := n.do(t, 41, http.MethodHead, done, nil, nil); a.status != http.StatusOK || a.header.Get(tus.HeaderMediaID) == "" {
				t.Errorf("HEAD of the finished upload after its DELETE was refused: %d media %q", a.status, a.header.Get(tus.HeaderMediaID))
			}
		})
	}
}

// An upload nothing was stored to for its expiry is gone (410) and, after the expirer's pass,
// removed with every byte it had (404): no row, no object (its tail's piece object too), no
// unfinished write. A finished upload's row goes too, its media and source stay, and a piece
// object left under its folder goes.
func TestUpload_Expiry(t *testing.T) {
	for name, newCluster := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			n := c.start(t)
			file := randomFile(t, 2*partSize)
			path := n.create(t, 51, len(file), "")
			// A part, and a tail of two pieces: a row and an object.
			sent := partSize + tus.MaxRowBytes + 101
			for _, cut := range [][2]int{{0, partSize + 100}, {partSize + 100, sent}} {
				if a := n.patch(t, 51, path, cut[0], file[cut[0]:cut[1]]); a.status != http.StatusNoContent {
					t.Fatalf("PATCH: %d %s", a.status, a.body)
				}
			}
			done := n.create(t, 51, 3, "")
			if a := n.patch(t, 51, done, 0, []byte("abc")); a.status != http.StatusNoContent {
				t.Fatalf("PATCH: %d %s", a.status, a.body)
			}
			// A piece object whose removal failed, under the finished upload's folder.
			if _, err := c.objects.Put(t.Context(), "tus/"+strings.TrimPrefix(done, tus.Base+"/")+"/tails/left/piece", strings.NewReader("left")); err != nil {
				t.Fatal(err)
			}
			// Their expiry is now: the clock is the database's.
			if _, err := c.pool.Exec(t.Context(), `UPDATE uploads SET expires_at = statement_timestamp()`); err != nil {
				t.Fatal(err)
			}
			wantError(t, "HEAD of an expired upload", n.do(t, 51, http.MethodHead, path, nil, nil), 410)
			wantError(t, "PATCH of an expired upload", n.patch(t, 51, path, sent, file[sent:sent+1]), 410)
			// The finished upload's source and the object left there, the unfinished one's tail
			// object and its part: a file on Local, an unfinished write on S3.
			if got, left := c.keys(t, "tus/"), c.unfinished(t); len(got)+len(left) < 4 {
				t.Fatalf("before the expirer's pass the store holds %q and unfinished writes %q", got, left)
			}
			if pieces := tailPieces(t, c, path); pieces != 2 {
				t.Fatalf("before the expirer's pass the upload's tail has %d pieces, want 2 (a row and an object)", pieces)
			}
			reg := prometheus.NewRegistry()
			expirer, err := tus.NewExpirer(tus.ExpirerConfig{Pool: c.pool, Objects: c.objects, Metrics: tus.NewMetrics(reg)})
			if err != nil {
				t.Fatal(err)
			}
			if removed, err := expirer.Expire(t.Context()); err != nil || removed != 2 {
				t.Fatalf("Expire: %d, %v; want the 2 uploads", removed, err)
			}
			wantError(t, "HEAD of a removed upload", n.do(t, 51, http.MethodHead, path, nil, nil), 404)
			var source string
			if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 51`).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if got, left := c.keys(t, "tus/"), c.unfinished(t); !slices.Equal(got, []string{source}) || len(left) != 0 {
				t.Errorf("after the pass the store holds %q and unfinished writes %q; want only the finished upload's source", got, left)
			}
			if pieces := tailPieces(t, c, path); pieces != 0 {
				t.Errorf("after the pass the expired upload's tail has %d pieces left", pieces)
			}
			if got := metricValue(t, reg, "playhead_tus_uploads_expired_total"); got != 1 {
				t.Errorf("expired uploads counted: %v, want 1 (the finished one's row is not an expired upload)", got)
			}
		})
	}
}

// The last byte's commit can fail (here the database refuses the encode job): the PATCH fails
// and so does every request until the commit succeeds, then the upload is media once.
func TestUpload_FailedFinishIsRetried(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t)
	if _, err := c.pool.Exec(t.Context(), `
		CREATE FUNCTION refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'enqueue refused by the test'; END $$;
		CREATE TRIGGER refuse_jobs BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_jobs();`); err != nil {
		t.Fatal(err)
	}
	path := n.create(t, 61, 5, "")
	wantError(t, "the last PATCH while jobs are refused", n.patch(t, 61, path, 0, []byte("video")), 500)
	wantError(t, "HEAD while jobs are refused", n.do(t, 61, http.MethodHead, path, nil, nil), 500)
	var media int
	if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM media`).Scan(&media); err != nil || media != 0 {
		t.Fatalf("%d media rows while the commit fails (%v)", media, err)
	}
	if _, err := c.pool.Exec(t.Context(), `DROP TRIGGER refuse_jobs ON jobs`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if a := n.do(t, 61, http.MethodHead, path, nil, nil); a.status != http.StatusOK || a.header.Get(tus.HeaderMediaID) == "" {
			t.Fatalf("HEAD once jobs are taken: %d media %q", a.status, a.header.Get(tus.HeaderMediaID))
		}
	}
	if err := c.pool.QueryRow(t.Context(), `SELECT count(*) FROM media m JOIN jobs j ON j.subject_id = m.id`).Scan(&media); err != nil || media != 1 {
		t.Fatalf("%d media rows with a job after the retries (%v), want 1", media, err)
	}
}

// A PATCH counts against the node's upload limits from its first byte, shared with POST
// /v1/media: with one place per member, a member writing one upload is refused 429 on another,
// while a second PATCH of the same upload shares the place (and meets the upload's lock: 423).
func TestUpload_SharesTheNodesUploadPlaces(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t, func(cfg *tus.Config) {
		cfg.Limits = &media.UploadLimits{MaxPerMember: 1, MaxTotal: 5, Timeout: time.Minute}
	})
	one := n.create(t, 71, 100, "")
	other := n.create(t, 71, 100, "")
	// Two bytes: the handler of a first-byte route runs once more than one has arrived.
	_, r := n.rawPatch(t, 71, one, 0, 100, []byte("xx"))
	answered := patchAnswer(r)
	waitFor(t, "the first PATCH to hold its upload's lock", func() bool { return advisoryLocks(t, c) == 1 })
	wantError(t, "a second PATCH of the same upload", n.patch(t, 71, one, 0, []byte("y")), 423)
	a := n.patch(t, 71, other, 0, []byte("z"))
	wantError(t, "a PATCH of another upload beyond the member's place", a, 429)
	if a.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	wantError(t, "another member", n.patch(t, 72, one, 0, []byte("z")), 404)
	select {
	case status := <-answered:
		t.Fatalf("the first PATCH was answered %d while still sending", status)
	default:
	}
}

// advisoryLocks counts the advisory locks held in the cluster's database.
func advisoryLocks(t *testing.T, c *cluster) int {
	t.Helper()
	var n int
	if err := c.pool.QueryRow(t.Context(), `
		SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A body longer than what is left of its upload is refused whole (413), however it is framed:
// no media is made of its first bytes, no upload is left behind by a refused creation, and the
// upload goes on from where it stood to the right file. (tusd reads a chunked body through a
// limit of the bytes left: the store took those, the upload ended as media, and the client got
// 413; a body ending on a part's boundary was cut without a word and answered 204.)
func TestUpload_BodyLongerThanTheUploadIsRefusedWhole(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t)
	count := func(query string, args ...any) int {
		t.Helper()
		var got int
		if err := c.pool.QueryRow(t.Context(), query, args...).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	wantError(t, "a creation with more bytes than the upload is long", n.do(t, 81, http.MethodPost, "/v1/uploads",
		map[string]string{"Upload-Length": "4", "Content-Type": "application/offset+octet-stream"}, []byte("too long")), 413)
	if rows := count(`SELECT count(*) FROM uploads WHERE owner_id = 81`); rows != 0 {
		t.Errorf("the refused creation left %d uploads", rows)
	}

	for _, tc := range []struct {
		name           string
		length, stored int
	}{
		{"past the end of a short last part", 100, 10},
		{"past the end of a whole last part", partSize, 0},
	} {
		file := randomFile(t, tc.length)
		path := n.create(t, 82, len(file), "")
		if tc.stored > 0 {
			if a := n.patch(t, 82, path, 0, file[:tc.stored]); a.status != http.StatusNoContent {
				t.Fatalf("%s: PATCH: %d %s", tc.name, a.status, a.body)
			}
		}
		long := append(append([]byte(nil), file[tc.stored:]...), "and more"...)
		wantError(t, tc.name+", chunked", n.chunked(t, 82, http.MethodPatch, path, map[string]string{"Upload-Offset": strconv.Itoa(tc.stored)}, long), 413)
		if made := count(`SELECT count(*) FROM media WHERE owner_id = 82`); made != 0 {
			t.Fatalf("%s: the refused PATCH made %d media", tc.name, made)
		}
		offset := n.offset(t, 82, path)
		if a := n.patch(t, 82, path, offset, file[offset:]); a.status != http.StatusNoContent || a.header.Get(tus.HeaderMediaID) == "" {
			t.Fatalf("%s: the right last PATCH: %d media %q %s", tc.name, a.status, a.header.Get(tus.HeaderMediaID), a.body)
		}
		var source string
		if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 82`).Scan(&source); err != nil {
			t.Fatal(err)
		}
		if sum, size := c.stored(t, source); sum != sha256.Sum256(file) {
			t.Errorf("%s: the stored source (%d bytes) is not the file", tc.name, size)
		}
		if _, err := c.pool.Exec(t.Context(), `DELETE FROM uploads WHERE owner_id = 82; DELETE FROM jobs; DELETE FROM media WHERE owner_id = 82`); err != nil {
			t.Fatal(err)
		}
	}

	// A chunked creation whose body runs past the length: refused, and the answer names the
	// upload it made, so that the client can go on with it or terminate it.
	a := n.chunked(t, 83, http.MethodPost, "/v1/uploads", map[string]string{"Upload-Length": "4"}, []byte("too long"))
	wantError(t, "a chunked creation with more bytes than the upload is long", a, 413)
	if made := count(`SELECT count(*) FROM media WHERE owner_id = 83`); made != 0 {
		t.Errorf("the refused creation made %d media", made)
	}
	if rows := count(`SELECT count(*) FROM uploads WHERE owner_id = 83`); rows != 0 {
		location := a.header.Get("Location")
		if !strings.HasPrefix(location, "/v1/uploads/") {
			t.Fatalf("the refused creation left an upload and its answer does not name it (Location %q)", location)
		}
		if d := n.do(t, 83, http.MethodDelete, location, nil, nil); d.status != http.StatusNoContent {
			t.Errorf("DELETE of the upload the refused creation named: %d %s", d.status, d.body)
		}
	}
}

// An upload being written is not expired: each stored byte starts its expiry again, and the
// expirer leaves alone an upload whose lock a request holds, even past its expiry (the request
// has stored nothing yet), so the request's bytes and the upload survive the pass.
func TestUpload_ExpiryWaitsForTheWriter(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	n := c.start(t)
	expiresIn := func(path string) time.Duration {
		t.Helper()
		var d time.Duration
		if err := c.pool.QueryRow(t.Context(), `SELECT expires_at - statement_timestamp() FROM uploads WHERE id = $1`,
			strings.TrimPrefix(path, tus.Base+"/")).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	file := randomFile(t, partSize+100)
	path := n.create(t, 91, len(file), "")
	for _, cut := range []int{10, partSize} { // a tail, then a part that takes it
		if _, err := c.pool.Exec(t.Context(), `UPDATE uploads SET expires_at = statement_timestamp() + interval '1 minute'`); err != nil {
			t.Fatal(err)
		}
		offset := n.offset(t, 91, path)
		if a := n.patch(t, 91, path, offset, file[offset:cut]); a.status != http.StatusNoContent {
			t.Fatalf("PATCH to %d: %d %s", cut, a.status, a.body)
		}
		if got := expiresIn(path); got < time.Hour { // the default expiry is 24 h
			t.Errorf("after storing up to byte %d the upload expires in %s: its expiry did not start again", cut, got)
		}
	}
	if pieces := tailPieces(t, c, path); pieces != 0 {
		t.Errorf("the part that took the tail left %d of its pieces", pieces)
	}
	// A PATCH holds the upload's lock while its body comes; meanwhile the upload's expiry passes.
	// The PATCH must be past its checks when the expiry passes: one that reads the upload after
	// it is refused 410, rightly (holding the lock is not enough to wait for).
	offset := partSize
	conn, r := n.rawPatch(t, 91, path, offset, len(file)-offset, file[offset:offset+2])
	answered := patchAnswer(r)
	waitFor(t, "the PATCH to store its body", func() bool { return metricValue(t, n.metrics, "playhead_tus_writes_in_progress") == 1 })
	if locks := advisoryLocks(t, c); locks != 1 {
		t.Fatalf("%d advisory locks while the PATCH writes, want its upload's 1", locks)
	}
	if removed, err := c.expireNow(t); err != nil || removed != 0 {
		t.Fatalf("Expire while a PATCH writes: removed %d, %v; want 0", removed, err)
	}
	if _, err := conn.Write(file[offset+2:]); err != nil {
		t.Fatal(err)
	}
	if status := <-answered; status != http.StatusNoContent {
		t.Fatalf("the PATCH that outlived its upload's expiry: %d, want 204", status)
	}
	if writing := metricValue(t, n.metrics, "playhead_tus_writes_in_progress"); writing != 0 {
		t.Errorf("%v PATCH bodies being stored after the last was answered, want 0", writing)
	}
	var source string
	if err := c.pool.QueryRow(t.Context(), `SELECT source_key FROM media WHERE owner_id = 91`).Scan(&source); err != nil {
		t.Fatal(err)
	}
	if sum, _ := c.stored(t, source); sum != sha256.Sum256(file) {
		t.Error("the stored source is not the file")
	}
}
