package export_test

import (
	"encoding/json"
	"io"
	"testing"
)

// TestExport_AnItemWatchedDuringTheExportIsSentOnce: items the member watches while their
// export streams (the last ones, which the node has not read yet once the client has read a
// megabyte) are in it once, with every other item.
func TestExport_AnItemWatchedDuringTheExportIsSentOnce(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	resp := b.get(t, 1, "")
	defer resp.Body.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `UPDATE playback SET event_time = statement_timestamp(), position_ms = 1
		WHERE member_id = 1 AND media_id > (SELECT max(media_id) - 10 FROM playback WHERE member_id = 1)`)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		History []struct {
			MediaID int64 `json:"media_id"`
		} `json:"history"`
	}
	if err := json.Unmarshal(append(head, rest...), &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, it := range doc.History {
		seen[it.MediaID]++
	}
	if len(doc.History) != historyItems || len(seen) != historyItems {
		t.Errorf("%d items, %d distinct; want each of the %d once", len(doc.History), len(seen), historyItems)
	}
}

// TestExport_ACutExportIsAnError: when the database fails part way (here its media table is
// renamed while the CSV streams), the client's read fails: the connection is closed before the
// chunked body's end, never ended as if the history were shorter.
func TestExport_ACutExportIsAnError(t *testing.T) {
	b := setup(t)
	b.seedHugeHistory(t)
	resp := b.get(t, 1, "?format=csv")
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `ALTER TABLE media RENAME TO media_away`)
	if n, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Errorf("the export ended cleanly after %d more bytes with its database failing", n)
	}
}
