package tus_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/playhead/playhead/tus"
)

// What a PATCH writes of its bytes into PostgreSQL is bounded whatever it sends: at most
// tus.MaxRowBytes go into rows of upload_tail_pieces, merges included; a larger tail piece is
// an object. A trigger the test adds sums the bytes of every row inserted (rolled back with a
// transaction that fails). The PATCHes: a part less a byte, then by turns the byte that fills
// the part and a part less a byte again (12 PATCHes, 48 MiB: the write-ahead log at line rate
// when every byte below a part is a row); a part less a byte, a part (which fills the part and
// leaves a part less a byte) and a byte; pieces at the bound and on either side of it, and
// 1-byte PATCHes past the bound on pieces (4 here: a merge into an object); the rest of the
// part, and 1-byte PATCHes again (a merge into a row). With every piece a row, the first PATCH
// puts 8 MiB - 1 B into the database. The log states the row bytes and the write-ahead log per
// PATCH (the server's, all of it: informative). Not parallel, so that the log is this test's.
func TestUpload_DatabaseGetsAtMostMaxRowBytesPerPatch(t *testing.T) {
	const part = 8 << 20
	const maxPieces = 4
	sizes := slices.Repeat([]int{part - 1, 1}, 6)
	// A part that fills the tail's and leaves a part less a byte, and the byte that fills it.
	sizes = append(sizes, part-1, part, 1)
	probes := []int{tus.MaxRowBytes, tus.MaxRowBytes + 1, tus.MaxRowBytes - 1, 1, 1}
	tail := 0
	for _, size := range probes {
		tail += size
	}
	sizes = append(sizes, probes...)
	sizes = append(sizes, part-tail)
	sizes = append(sizes, slices.Repeat([]int{1}, maxPieces+1)...)
	for _, name := range []string{"Local", "S3"} {
		t.Run(name, func(t *testing.T) {
			c := backends()[name](t)
			if _, err := c.pool.Exec(t.Context(), `
				CREATE TABLE test_tail_row_bytes (n bigint NOT NULL);
				INSERT INTO test_tail_row_bytes VALUES (0);
				CREATE FUNCTION test_count_tail_row_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					UPDATE test_tail_row_bytes SET n = n + coalesce(octet_length(NEW.bytes), 0);
					RETURN NULL;
				END $$;
				CREATE TRIGGER test_count_tail_row_bytes AFTER INSERT ON upload_tail_pieces
					FOR EACH ROW EXECUTE FUNCTION test_count_tail_row_bytes();`); err != nil {
				t.Fatal(err)
			}
			rowBytes := func() int64 {
				t.Helper()
				var n int64
				if err := c.pool.QueryRow(t.Context(), `SELECT n FROM test_tail_row_bytes`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			walAt := func() string {
				t.Helper()
				var lsn string
				if err := c.pool.QueryRow(t.Context(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
					t.Fatal(err)
				}
				return lsn
			}
			walSince := func(lsn string) int64 {
				t.Helper()
				var n int64
				if err := c.pool.QueryRow(t.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			n := c.start(t, func(cfg *tus.Config) {
				cfg.PartSize = part
				tus.SetMaxTailPieces(cfg, maxPieces)
			})
			total := 0
			for _, size := range sizes {
				total += size
			}
			file := randomFile(t, total)
			// One byte more than is sent: the upload never ends.
			path := n.create(t, 111, len(file)+1, "")
			start, wal := rowBytes(), walAt()
			var rows, wals []int64
			offset := 0
			for i, size := range sizes {
				before, lsn := rowBytes(), walAt()
				if a := n.patch(t, 111, path, offset, file[offset:offset+size]); a.status != http.StatusNoContent {
					t.Fatalf("PATCH %d, of %d bytes at %d: %d %s", i, size, offset, a.status, a.body)
				}
				offset += size
				inserted := rowBytes() - before
				rows, wals = append(rows, inserted), append(wals, walSince(lsn))
				if inserted > tus.MaxRowBytes {
					t.Errorf("PATCH %d, of %d bytes, inserted %s into tail rows, more than the bound of %s a request",
						i, size, mib(inserted), mib(tus.MaxRowBytes))
				}
			}
			allRows, allWAL := rowBytes()-start, walSince(wal)
			t.Logf("%s: the first 12 PATCHes (8 MiB - 1 B and 1 B by turns) inserted %d B into rows in all, at most %d B one, and made %s of WAL (at most %s one); all %d PATCHes: sent %s, rows %s (at most %s a PATCH), WAL %s",
				name, sum(rows[:12]), slices.Max(rows[:12]), mib(sum(wals[:12])), mib(slices.Max(wals[:12])),
				len(sizes), mib(int64(offset)), mib(allRows), mib(slices.Max(rows)), mib(allWAL))
			if pieces := tailPieces(t, c, path); pieces > maxPieces {
				t.Errorf("the tail has %d pieces, more than its bound of %d", pieces, maxPieces)
			}
		})
	}
}

func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}
