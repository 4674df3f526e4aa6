package playback_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/internal/pgtest"
)

// TestSQLFunctions_InlinedByThePlanner: every playhead_* SQL function of the schema is inlined
// where a statement calls it. The flush calls them once per row written, and one that is not
// inlined runs through an executor of its own each time: a body that calls the STABLE
// extract(epoch FROM timestamptz) inside an IMMUTABLE function, which PostgreSQL refuses to
// inline, was measured costing 38 % of the database's CPU per position (playhead_list_bucket's
// first body, replaced by migration 00022).
func TestSQLFunctions_InlinedByThePlanner(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	// The check itself must see a function that is not inlined: the same mistake, on purpose.
	if _, err := conn.Exec(ctx, `CREATE FUNCTION pg_temp.not_inlined(t timestamptz) RETURNS double precision
		LANGUAGE sql IMMUTABLE RETURN extract(epoch FROM t)`); err != nil {
		t.Fatal(err)
	}
	if plan := callPlan(t, conn.Conn(), "pg_temp.not_inlined", []string{"timestamp with time zone"}); !strings.Contains(plan, "not_inlined(") {
		t.Fatalf("the control function (an IMMUTABLE body calling a STABLE function) looks inlined:\n%s", plan)
	}

	rows, err := conn.Query(ctx, `SELECT p.proname, array(SELECT format_type(a, NULL) FROM unnest(p.proargtypes) AS a)
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.proname LIKE 'playhead\_%' AND l.lanname = 'sql' AND p.pronamespace = 'public'::regnamespace
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type function struct {
		name string
		args []string
	}
	var functions []function
	for rows.Next() {
		var f function
		if err := rows.Scan(&f.name, &f.args); err != nil {
			t.Fatal(err)
		}
		functions = append(functions, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(functions) < 4 {
		t.Fatalf("found %d playhead_* SQL functions (%v), want the 4 of the migrations at least", len(functions), functions)
	}
	for _, f := range functions {
		if plan := callPlan(t, conn.Conn(), f.name, f.args); strings.Contains(plan, f.name+"(") {
			t.Errorf("%s(%s) is not inlined (is its body as immutable as it is declared?):\n%s", f.name, strings.Join(f.args, ", "), plan)
		}
	}
}

// callPlan returns the verbose plan of a call of fn on the columns of a temporary table, one
// of each argument type: columns, unlike constants, cannot be folded away, so the plan names
// fn exactly when the planner did not inline it.
func callPlan(t *testing.T, conn *pgx.Conn, fn string, argTypes []string) string {
	t.Helper()
	ctx := context.Background()
	cols, refs := make([]string, len(argTypes)), make([]string, len(argTypes))
	for i, typ := range argTypes {
		cols[i], refs[i] = fmt.Sprintf("a%d %s", i, typ), fmt.Sprintf("a%d", i)
	}
	table := "args_" + strings.NewReplacer(".", "_").Replace(fn)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s (%s)", table, strings.Join(cols, ", "))); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN (VERBOSE, COSTS OFF) SELECT %s(%s) FROM %s", fn, strings.Join(refs, ", "), table))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	// The name is the function's, so an overload (the same name, other argument types) needs
	// the table dropped before its own is created.
	if _, err := conn.Exec(ctx, "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
