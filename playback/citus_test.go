package playback

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
)

// The Citus plan: where each table goes when playback outgrows one PostgreSQL primary
// (docs/internals/scaling.md, "The plan as data"). The test below reads the migrated schema from the
// catalog and the hot statements from this package, and checks them against the rules that
// let Citus run them; docs/internals/scaling.md states the same plan and rules.

type placementKind int

const (
	// distributed tables are hash-sharded by their column across the workers.
	distributed placementKind = iota
	// reference tables are copied whole to every node: joinable with any shard.
	reference
	// coordinator tables stay on the coordinator as plain (Citus local) tables: the job queue
	// with its SKIP LOCKED claim, advisory locks and LISTEN/NOTIFY, the outbox and webhooks.
	coordinator
)

func (k placementKind) String() string {
	return [...]string{"distributed", "reference", "coordinator"}[k]
}

type placement struct {
	kind   placementKind
	column string // the distribution column of a distributed table
}

// citusPlan covers every table and view of the schema; a new table fails the test until it
// is placed here (and in docs/internals/scaling.md).
var citusPlan = map[string]placement{
	// Per-member progress: the hot, growing data, written by every flush.
	"playback":               {distributed, "member_id"},
	"playback_last_finished": {distributed, "member_id"},
	// The finishes the flush records with the positions, until the completion mover moves
	// them into the outbox, and the courses it found completed: a member's rows, like playback.
	"playback_completions":   {distributed, "member_id"},
	"collection_completions": {distributed, "member_id"},
	// The catalogue every member's statements join: small next to playback, written rarely.
	// members is here because media references it; import_rows and imports because the flush
	// and the list join import_rows for every member (a collection's placements).
	"members":     {kind: reference},
	"media":       {kind: reference},
	"imports":     {kind: reference},
	"import_rows": {kind: reference},
	// Captions: a few rows per media, written rarely, read with the media row when
	// a master playlist is served.
	"captions": {kind: reference},
	// Chapters: a few rows per media, written rarely by its owner, read with the media row
	// when its chapters JSON is served, like captions.
	"media_chapters": {kind: reference},
	// A view over reference tables only, so it is joinable from any shard like them.
	"collection_items": {kind: reference},
	// The pipeline: few rows a second, claimed with FOR UPDATE SKIP LOCKED (single-node only
	// on Citus), woken by LISTEN/NOTIFY, pruned under an advisory lock.
	"jobs":                {kind: coordinator},
	"notification_outbox": {kind: coordinator},
	"webhook_endpoints":   {kind: coordinator},
	"webhook_deliveries":  {kind: coordinator},
	"outbox_retention":    {kind: coordinator},
	"job_schedules":       {kind: coordinator},
	// Job dependencies: a few edges per group, written with the group and read by
	// its jobs' finishing transactions, like jobs.
	"job_dependencies": {kind: coordinator},
	// A paused kind of the job queue, read by every claim of the kind.
	"job_kind_pauses": {kind: coordinator},
	// An encode group's renditions: a few rows per media, written by its rendition
	// jobs, read with the media row when its master playlist is served, like captions.
	"media_renditions": {kind: reference},
	// The audience: media marked by every flush (a statement of its own, reading
	// only its parameters) and their rollups, one row per media, like media.
	"audience_dirty": {kind: coordinator},
	"media_audience": {kind: reference},
	// Playback-quality counters: a few rows per media, added to by each API node once a
	// period (one statement, not per report) and read by the rollup, like media_audience.
	"media_quality":    {kind: reference},
	"goose_db_version": {kind: coordinator},
	// Resumable uploads: a row per upload in flight, written a few times a second
	// per upload and committed with its media and encode job; locked by advisory locks.
	"uploads": {kind: coordinator},
	// The tails of those uploads, written in the same transactions as their rows.
	"upload_tail_pieces": {kind: coordinator},
	// What every flush anti-joins for each report (the erasure fence, paused histories,
	// forgotten items): written rarely, by one member's request or an erasure, and read for
	// rows of many members, so joinable from any shard.
	"member_erasures":    {kind: reference},
	"history_paused":     {kind: reference},
	"playback_forgotten": {kind: reference},
	// A provider's subjects: a row per member, written once at their first token with their
	// members row (which it references), read by key when a node has not cached it, like members.
	"member_subjects": {kind: reference},
	// A completion's xAPI statement until the LRS takes it: written by the xAPI relay with its
	// job, like webhook_deliveries.
	"xapi_statements": {kind: coordinator},
}

// hotStatement is a statement checked against the plan. singleMember statements name one
// member ($n) and must reach one shard; the others are the bulk flush, which may write rows of
// many members but may read no distributed table.
type hotStatement struct {
	name         string
	sql          string
	singleMember bool
}

var hotStatements = []hotStatement{
	{"flush (Store.Flush)", flushSQL, false},
	{"sync upsert (Store.UpsertOne)", upsertOneSQL, false},
	{"open (Store.Open)", openSQL, true},
	{"hide (Store.Hide)", hideSQL, true},
	{"forget's second delete (Store.Forget)", forgetAgainSQL, true},
	{"get (Store.Get)", getSQL, true},
	{"continue-watching list (Store.List)", listSQL, true},
}

func TestSchemaAndHotStatementsAreCitusReady(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	for _, v := range schemaViolations(t, pool, citusPlan) {
		t.Error(v)
	}
	for _, st := range hotStatements {
		if !slices.ContainsFunc(tableRefs(tokenize(st.sql), citusPlan), func(r tableRef) bool { return citusPlan[r.table].kind == distributed }) {
			t.Errorf("%s: names no distributed table, so nothing in it was checked", st.name)
		}
		for _, v := range statementViolations(st, citusPlan) {
			t.Errorf("%s: %s", st.name, v)
		}
	}
}

// TestCitusRulesCatchViolations breaks every rule once, in a schema and statements made for
// it, and checks each is reported: the readiness test above can fail.
func TestCitusRulesCatchViolations(t *testing.T) {
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		CREATE TABLE bad_dist (member_id bigint NOT NULL, media_id bigint NOT NULL, code text UNIQUE, PRIMARY KEY (member_id, media_id));
		CREATE UNIQUE INDEX bad_dist_media_idx ON bad_dist (media_id);
		CREATE TABLE bad_other (owner bigint, member_id bigint NOT NULL, UNIQUE (owner, member_id));
		ALTER TABLE bad_dist ADD FOREIGN KEY (media_id, member_id) REFERENCES bad_other (owner, member_id);
		CREATE TABLE bad_ref (id bigint PRIMARY KEY, member_id bigint, media_id bigint,
			FOREIGN KEY (member_id, media_id) REFERENCES bad_dist (member_id, media_id));
		CREATE TABLE bad_unplaced (id bigint);
		CREATE TABLE bad_excl (member_id bigint NOT NULL, media_id bigint NOT NULL, EXCLUDE USING btree (media_id WITH =))`); err != nil {
		t.Fatal(err)
	}
	plan := maps.Clone(citusPlan)
	maps.Copy(plan, map[string]placement{
		"bad_dist":  {distributed, "member_id"},
		"bad_other": {distributed, "owner"}, // owner is nullable
		"bad_ref":   {kind: reference},
		"bad_excl":  {distributed, "member_id"},
		"missing":   {kind: reference},
	})
	got := strings.Join(schemaViolations(t, pool, plan), "\n")
	for _, want := range []string{
		`bad_dist_code_key on distributed table bad_dist lacks its distribution column member_id`,
		`bad_dist_media_idx on distributed table bad_dist lacks its distribution column member_id`,
		`distribution column bad_other.owner is nullable`,
		`foreign key bad_dist_media_id_member_id_fkey from distributed table bad_dist to distributed table bad_other does not pair member_id with owner`,
		`foreign key bad_ref_member_id_media_id_fkey from reference table bad_ref to distributed table bad_dist`,
		`table bad_unplaced has no place in the plan`,
		`exclusion constraint bad_excl_media_id_excl on distributed table bad_excl lacks its distribution column member_id`,
		`planned table missing is not in the schema`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("schema violations lack %q; got:\n%s", want, got)
		}
	}

	for _, c := range []struct {
		st   hotStatement
		want string
	}{
		{hotStatement{"subquery in SET", `INSERT INTO playback AS p (member_id, media_id) VALUES ($1, $2)
			ON CONFLICT (member_id, media_id) DO UPDATE SET position_ms = (SELECT max(position_ms) FROM playback_last_finished)`, true},
			"ON CONFLICT DO UPDATE on playback reads a subquery"},
		{hotStatement{"other table in SET", `INSERT INTO playback AS p (member_id, media_id) SELECT t.member_id, t.media_id FROM reported t
			ON CONFLICT (member_id, media_id) DO UPDATE SET position_ms = t.position_ms`, false},
			"ON CONFLICT DO UPDATE on playback refers to t.position_ms"},
		{hotStatement{"clock in SET", `INSERT INTO playback AS p (member_id, media_id) VALUES ($1, $2)
			ON CONFLICT (member_id, media_id) DO UPDATE SET updated_at = now()`, true},
			"ON CONFLICT DO UPDATE on playback calls now()"},
		{hotStatement{"conflict target", `INSERT INTO playback_last_finished AS l (member_id, collection) VALUES ($1, $2)
			ON CONFLICT (collection) DO UPDATE SET media_id = excluded.media_id`, true},
			"conflict target (collection) on playback_last_finished lacks member_id"},
		{hotStatement{"unpinned read", `SELECT p.position_ms FROM playback p JOIN media m ON m.id = p.media_id WHERE p.media_id = $2`, true},
			"reads playback p without p.member_id = $n"},
		{hotStatement{"two members", `SELECT 1 FROM playback p JOIN playback q ON q.member_id = $2 WHERE p.member_id = $1`, true},
			"pins members by different parameters $1, $2"},
		{hotStatement{"unpinned insert", `INSERT INTO playback (member_id, media_id) VALUES (42, $2)`, true},
			"writes playback with member_id = 42, not a parameter"},
		{hotStatement{"bulk read", `INSERT INTO playback AS p (member_id, media_id) SELECT member_id, media_id FROM playback_last_finished
			ON CONFLICT (member_id, media_id) DO NOTHING`, false},
			"bulk statement reads distributed table playback_last_finished"},
		{hotStatement{"pin beside OR", `SELECT 1 FROM playback p WHERE p.member_id = $1 OR p.media_id = $2`, true},
			"reads playback p without p.member_id = $n"},
		{hotStatement{"pin beside OR in a subquery", `SELECT 1 FROM media m WHERE NOT EXISTS (SELECT 1 FROM playback o WHERE o.member_id = $1 AND o.media_id = m.id OR o.hidden)`, true},
			"reads playback o without o.member_id = $n"},
		{hotStatement{"comma join", `SELECT 1 FROM playback p, playback_last_finished l WHERE p.member_id = $1`, true},
			"reads playback_last_finished l without l.member_id = $n"},
		{hotStatement{"quoted name", `SELECT 1 FROM media m JOIN "playback" p ON p.media_id = m.id WHERE m.id = $1`, true},
			"reads playback p without p.member_id = $n"},
		{hotStatement{"coordinator join", `SELECT 1 FROM playback p JOIN jobs j ON j.subject_id = p.media_id WHERE p.member_id = $1`, true},
			"joins coordinator table jobs with distributed table playback"},
	} {
		got := strings.Join(statementViolations(c.st, citusPlan), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: violations lack %q; got:\n%s", c.st.name, c.want, got)
		}
	}
}

// schemaViolations reads the public schema from the catalog and returns what breaks plan.
func schemaViolations(t *testing.T, pool *pgxpool.Pool, plan map[string]placement) []string {
	t.Helper()
	ctx := context.Background()
	var out []string

	relations := query(t, pool, `
		SELECT c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')`, func(r pgx.CollectableRow) ([2]string, error) {
		var rel [2]string
		return rel, r.Scan(&rel[0], &rel[1])
	})
	present := map[string]bool{}
	for _, rel := range relations {
		present[rel[0]] = true
		if _, ok := plan[rel[0]]; !ok {
			out = append(out, fmt.Sprintf("table %s has no place in the plan", rel[0]))
		}
	}
	for name := range plan {
		if !present[name] {
			out = append(out, fmt.Sprintf("planned table %s is not in the schema", name))
		}
	}

	// Distribution columns: present, NOT NULL (Citus refuses a row without one), and of one
	// type, so that all distributed tables are co-located and join on member_id shard-locally.
	types := map[string][]string{}
	for name, p := range plan {
		if p.kind != distributed || !present[name] {
			continue
		}
		var typ string
		var notNull bool
		err := pool.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
			WHERE attrelid = to_regclass('public.' || $1) AND attname = $2 AND NOT attisdropped`, name, p.column).Scan(&typ, &notNull)
		if err == pgx.ErrNoRows {
			out = append(out, fmt.Sprintf("distribution column %s.%s does not exist", name, p.column))
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !notNull {
			out = append(out, fmt.Sprintf("distribution column %s.%s is nullable", name, p.column))
		}
		types[typ] = append(types[typ], name)
	}
	if len(types) > 1 {
		out = append(out, fmt.Sprintf("distribution columns differ in type, so the tables cannot be co-located: %v", types))
	}

	// Every unique index (primary keys and unique constraints included) and every exclusion
	// constraint of a distributed table contains its distribution column: a shard can only
	// check its own rows.
	uniques := query(t, pool, `
		SELECT t.relname, i.relname, array(SELECT a.attname::text FROM unnest(x.indkey) k JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k),
		       CASE WHEN x.indisexclusion THEN 'exclusion constraint' ELSE 'unique index' END
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = 'public' AND (x.indisunique OR x.indisexclusion)`, func(r pgx.CollectableRow) (uniqueIndex, error) {
		var u uniqueIndex
		return u, r.Scan(&u.table, &u.index, &u.columns, &u.what)
	})
	for _, u := range uniques {
		if p, ok := plan[u.table]; ok && p.kind == distributed && !slices.Contains(u.columns, p.column) {
			out = append(out, fmt.Sprintf("%s %s on distributed table %s lacks its distribution column %s (has %v)",
				u.what, u.index, u.table, p.column, u.columns))
		}
	}

	// Foreign keys: to a reference table from anywhere; between distributed tables only when
	// the key pairs the two distribution columns (co-located rows); never from a reference or
	// coordinator table to a distributed one, nor from a distributed table to the coordinator.
	fks := query(t, pool, `
		SELECT c.conname, src.relname, dst.relname,
		       array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
		       array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)
		FROM pg_constraint c JOIN pg_class src ON src.oid = c.conrelid JOIN pg_class dst ON dst.oid = c.confrelid
		JOIN pg_namespace n ON n.oid = src.relnamespace
		WHERE n.nspname = 'public' AND c.contype = 'f'`, func(r pgx.CollectableRow) (foreignKey, error) {
		var f foreignKey
		return f, r.Scan(&f.name, &f.from, &f.to, &f.fromColumns, &f.toColumns)
	})
	for _, f := range fks {
		from, okFrom := plan[f.from]
		to, okTo := plan[f.to]
		if !okFrom || !okTo {
			continue // reported above as unplaced
		}
		switch {
		case to.kind == reference:
		case from.kind == distributed && to.kind == distributed:
			i := slices.Index(f.fromColumns, from.column)
			if i < 0 || f.toColumns[i] != to.column {
				out = append(out, fmt.Sprintf("foreign key %s from distributed table %s to distributed table %s does not pair %s with %s",
					f.name, f.from, f.to, from.column, to.column))
			}
		case from.kind == coordinator && to.kind == coordinator:
		default:
			out = append(out, fmt.Sprintf("foreign key %s from %s table %s to %s table %s", f.name, from.kind, f.from, to.kind, f.to))
		}
	}

	// A view is placed like what it reads: a "reference" view must read reference tables only.
	views := query(t, pool, `SELECT view_name::text, table_name::text FROM information_schema.view_table_usage WHERE view_schema = 'public'`,
		func(r pgx.CollectableRow) ([2]string, error) {
			var v [2]string
			return v, r.Scan(&v[0], &v[1])
		})
	for _, v := range views {
		if view, ok := plan[v[0]]; ok && plan[v[1]].kind != view.kind {
			out = append(out, fmt.Sprintf("view %s is planned %s but reads %s table %s", v[0], view.kind, plan[v[1]].kind, v[1]))
		}
	}
	return out
}

type uniqueIndex struct {
	table, index string
	columns      []string
	what         string // unique index or exclusion constraint
}

type foreignKey struct {
	name, from, to         string
	fromColumns, toColumns []string
}

func query[T any](t *testing.T, pool *pgxpool.Pool, sql string, scan pgx.RowToFunc[T]) []T {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
