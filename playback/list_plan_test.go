package playback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// TestListSQL_FinishedRowsCostNoWork reads the continue-watching list of members who finished
// many lessons of one 400-lesson course and checks, with EXPLAIN (ANALYZE, BUFFERS), what the
// statement touches, never how long it takes, in its plan for the member (custom) and in the
// plan for any member (generic) the server's read pool uses. The list reads the newest finished lesson of
// each course (playback_last_finished), not every finished row: the rows passed through the
// plan's nodes, and the buffers read, for a member with 200 finished lessons are those for a
// member with 50, within 4 rows and one buffer per extra finished lesson (the version that
// read every finished row passed about 10 rows and 9 buffers per finished lesson). The rows'
// margin is for the planner: on this small table it reads the in-progress part of member
// 200's list with a hash join over all 400 media rows (2.3 rows per extra finished lesson)
// where member 50's uses index probes; the buffers are the same.
func TestListSQL_FinishedRowsCostNoWork(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.Pool(t)
	ctx := context.Background()
	// One course of 400 lessons (20 chapters of 20); member 50 finished lessons 1-50, member
	// 200 lessons 1-200, each in order a minute apart, and is half way through the next one.
	if _, err := pool.Exec(ctx, `
		INSERT INTO members (id) VALUES (1), (50), (200);
		WITH imp AS (
			INSERT INTO imports (created_by, filename, total_rows, accepted, rejected)
			VALUES (1, 'plan.csv', 400, 400, 0) RETURNING id),
		lessons AS (
			INSERT INTO media (owner_id, title, status, visibility, duration_ms, hls_key)
			SELECT 1, 'lesson ' || g, 'READY', 'PUBLIC', 600000, 'hls/x/master.m3u8'
			FROM generate_series(1, 400) g RETURNING id)
		INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
		SELECT imp.id, n + 1, 'course', (n - 1) / 20 + 1, (n - 1) % 20 + 1, 'https://example.com/l.mp4', l.id
		FROM imp, (SELECT id, row_number() OVER (ORDER BY id) AS n FROM lessons) l;
		INSERT INTO playback (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished)
		SELECT member, l.media_id, CASE WHEN l.n <= member THEN 600000 ELSE 300000 END,
		       statement_timestamp() - interval '1 minute' * (500 - l.n), statement_timestamp(),
		       CASE WHEN l.n <= member THEN statement_timestamp() END, l.n <= member
		FROM (VALUES (50), (200)) m(member),
		     (SELECT media_id, row_number() OVER (ORDER BY chapter, position) AS n FROM import_rows) l
		WHERE l.n <= member + 1;
		-- What the flush keeps for these rows: each member's newest finished lesson.
		INSERT INTO playback_last_finished (member_id, collection, media_id, event_time)
		SELECT DISTINCT ON (p.member_id) p.member_id, 'course', p.media_id, p.event_time
		FROM playback p WHERE p.finished ORDER BY p.member_id, p.event_time DESC;
		ANALYZE`); err != nil {
		t.Fatal(err)
	}
	// The server reads the list on a pool that plans it once for any member (a generic plan,
	// dbpool.OpenGenericPlans); a plain pool plans it for the member's id. Both plans must do
	// no work per finished lesson.
	generic, err := dbpool.OpenGenericPlans(ctx, dbURL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(generic.Close)
	if _, err := generic.Exec(ctx, "PREPARE list_plan(bigint, timestamptz, bigint, int, float8, bigint, float8, bigint, bigint) AS "+playback.ListSQL); err != nil {
		t.Fatal(err)
	}
	// The list's resume thresholds ($5–$9), written out for EXECUTE.
	thresholds := strings.Trim(fmt.Sprint(media.DefaultCompletion.Args()), "[]")
	thresholds = strings.ReplaceAll(thresholds, " ", ", ")
	work := func(planned string, member int64) (rows, buffers float64) {
		t.Helper()
		var raw []byte
		var err error
		if planned == "generic" {
			err = generic.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE list_plan(%d, NULL, 0, 21, %s)", member, thresholds)).Scan(&raw)
		} else {
			err = pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+playback.ListSQL, append([]any{member, nil, int64(0), 21}, media.DefaultCompletion.Args()...)...).Scan(&raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("explain: %v %s", err, raw)
		}
		return plan[0].Plan.rows(), plan[0].Plan.SharedHit + plan[0].Plan.SharedRead
	}
	for _, planned := range []string{"custom", "generic"} {
		work(planned, 50) // warm the catalogue and the pages both members share
		fewRows, fewBuffers := work(planned, 50)
		manyRows, manyBuffers := work(planned, 200)
		rowsPer, buffersPer := (manyRows-fewRows)/150, (manyBuffers-fewBuffers)/150
		t.Logf("%s plan: rows through plan nodes: 50 finished %.0f, 200 finished %.0f, %.1f per extra finished row", planned, fewRows, manyRows, rowsPer)
		t.Logf("%s plan: buffers: 50 finished %.0f, 200 finished %.0f, %.1f per extra finished row", planned, fewBuffers, manyBuffers, buffersPer)
		if rowsPer > 4 {
			t.Errorf("%s plan: each finished row passes %.1f rows through the plan, want at most 4: the list reads finished rows", planned, rowsPer)
		}
		if buffersPer > 1 {
			t.Errorf("%s plan: each finished row costs %.1f buffers, want at most 1: the list reads finished rows", planned, buffersPer)
		}
	}

	// The list itself: lesson 51 (resp. 201) in progress; the up-next after lesson 50 (201) is
	// not listed because the member has a row for it.
	store := playback.NewStore(pool, media.DefaultCompletion)
	for _, member := range []int64{50, 200} {
		items, _, err := store.List(ctx, member, nil, 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 || items[0].UpNext != nil || items[0].PositionMS != 300000 {
			t.Errorf("member %d: list = %+v, want the one lesson in progress", member, items)
		}
	}
}

// planNode is the part of an EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) node the test reads.
type planNode struct {
	ActualRows  float64    `json:"Actual Rows"`
	ActualLoops float64    `json:"Actual Loops"`
	SharedHit   float64    `json:"Shared Hit Blocks"`
	SharedRead  float64    `json:"Shared Read Blocks"`
	Plans       []planNode `json:"Plans"`
}

// rows is the number of rows every node of the plan produced, over all its loops: the work
// the statement did, in rows.
func (n planNode) rows() float64 {
	sum := n.ActualRows * n.ActualLoops
	for _, c := range n.Plans {
		sum += c.rows()
	}
	return sum
}
