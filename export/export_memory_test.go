package export_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/playhead/playhead/api"
	"github.com/playhead/playhead/internal/heaptest"
)

// hugeHistory is the memory test's member: historyItems playback rows (each media's title a
// kilobyte, every other bucket watched: 50 ranges an item) and uploads media of their own.
const (
	historyItems = 10_000
	uploads      = 200
	// heapBound is the most the export may grow the heap by. The document is about 30 MB:
	// building it in memory (or the rows behind it) goes past this bound.
	heapBound = 32 << 20
)

// seedHugeHistory gives member 1 the memory test's history and uploads; member 2 owns the
// watched media.
func (b *bundle) seedHugeHistory(t *testing.T) {
	t.Helper()
	b.exec(t, `INSERT INTO members (id) VALUES (1), (2)`)
	b.exec(t, `INSERT INTO media (owner_id, title, status, visibility, duration_ms)
		SELECT 2, 'Lecture ' || g || ' ' || repeat('x', 1000), 'READY', 'PUBLIC', 600000 FROM generate_series(1, $1) g`, historyItems)
	b.exec(t, `INSERT INTO media (owner_id, title, status, visibility, duration_ms)
		SELECT 1, 'Upload ' || g, 'READY', 'PRIVATE', 60000 FROM generate_series(1, $1) g`, uploads)
	b.exec(t, `INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, finished, collection, watched, watched_bucket)
		SELECT 1, id, 300000, statement_timestamp() - id * interval '1 minute', statement_timestamp(), id % 2 = 0, 'course ' || id % 7,
		       repeat('10', 50)::bit(100), 50
		FROM media WHERE owner_id = 2`)
}

// TestExport_StreamsAHugeHistoryInBoundedMemory: the JSON export of 10 000 history items and
// 200 uploads grows the heap of the process serving it by less than 32 MiB (the client in
// the same process writes it to a file as it reads), and is what the OpenAPI document's
// MemberExport says, checked by kin-openapi's JSON Schema validator; its CSV reads with
// Python's csv module as one row per item.
func TestExport_StreamsAHugeHistoryInBoundedMemory(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)

	var path string
	growth, baseline := heaptest.Growth(func() { path = b.download(t, 1, "") })
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("JSON export: %d bytes; heap growth %.1f MiB over a baseline of %.1f MiB", info.Size(),
		float64(growth)/(1<<20), float64(baseline)/(1<<20))
	if growth >= heapBound {
		t.Errorf("the export grew the heap by %.1f MiB, over %d MiB: it is not streamed", float64(growth)/(1<<20), heapBound>>20)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the export is not JSON: %v", err)
	}
	if err := memberExportSchema(t).VisitJSON(doc, openapi3.EnableJSONSchema2020(), openapi3.EnableFormatValidation()); err != nil {
		t.Fatalf("the export does not validate against MemberExport: %.2000v", err)
	}
	history, _ := doc["history"].([]any)
	owned, _ := doc["uploads"].([]any)
	if len(history) != historyItems || len(owned) != uploads {
		t.Fatalf("history %d items, uploads %d; want %d and %d", len(history), len(owned), historyItems, uploads)
	}
	first := history[0].(map[string]any)
	if ranges := first["watched_ranges"].([]any); len(ranges) != 50 {
		t.Errorf("an item with every other bucket watched has %d ranges, want 50", len(ranges))
	}

	csvPath := b.download(t, 1, "?format=csv")
	out, err := exec.Command("python3", "-c", `
import csv, sys
with open(sys.argv[1], newline='', encoding='utf-8') as f:
    rows = list(csv.reader(f))
print(len(rows) - 1)
print(rows[0])
print(rows[1][4].split('; ')[0], len(rows[1][4].split('; ')))
`, csvPath).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 csv: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "10000" {
		t.Errorf("Python's csv reads %s rows after the header, want %d", lines[0], historyItems)
	}
	if lines[1] != "['Title', 'Started', 'Last watched', 'Last position', 'Watched ranges', 'Finished', 'Course']" {
		t.Errorf("header %s", lines[1])
	}
	// The first item is media 1 (10 minutes long): buckets of 6 s, every other one watched.
	if lines[2] != "00:00:00-00:00:06 50" {
		t.Errorf("the first row's watched ranges start %s", lines[2])
	}
}

// memberExportSchema is MemberExport of api/openapi.yaml, as kin-openapi loads it.
func memberExportSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.Document)
	if err != nil {
		t.Fatal(err)
	}
	ref := doc.Components.Schemas["MemberExport"]
	if ref == nil || ref.Value == nil {
		t.Fatal("api/openapi.yaml has no MemberExport schema")
	}
	return ref.Value
}

// TestExport_CSVMemoryIsBoundedToo: the CSV of the same history streams as the JSON does.
func TestExport_CSVMemoryIsBoundedToo(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	growth, _ := heaptest.Growth(func() { b.download(t, 1, "?format=csv") })
	t.Logf("CSV export: heap growth %.1f MiB", float64(growth)/(1<<20))
	if growth >= heapBound {
		t.Errorf("the CSV export grew the heap by %.1f MiB, over %d MiB", float64(growth)/(1<<20), heapBound>>20)
	}
}
