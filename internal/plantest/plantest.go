// Package plantest reads what a statement's plan touched, from EXPLAIN (ANALYZE, FORMAT JSON),
// for the tests that hold a statement to reading about a batch, never a backlog. They count
// rows and scans, never time.
package plantest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Node is the part of one node of EXPLAIN's JSON the counts need.
type Node struct {
	NodeType     string  `json:"Node Type"`
	RelationName string  `json:"Relation Name"`
	ActualRows   float64 `json:"Actual Rows"`
	ActualLoops  float64 `json:"Actual Loops"`
	// RemovedByFilter counts the rows a scan read and dropped for its filter.
	RemovedByFilter float64 `json:"Rows Removed by Filter"`
	Plans           []Node  `json:"Plans"`
}

// Analyze runs EXPLAIN (ANALYZE) of sql with args in a transaction it rolls back, so that a
// DELETE deletes nothing, and returns the plan's root.
func Analyze(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) Node {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var plan []struct {
		Plan Node `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(plan))
	}
	return plan[0].Plan
}

// AnalyzeGeneric is Analyze of sql's generic plan, the one a prepared statement runs when
// plan_cache_mode is force_generic_plan: sql is prepared, then EXPLAIN (ANALYZE) executes it
// with args written as literals (strings, integers, durations and nil only).
func AnalyzeGeneric(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) Node {
	t.Helper()
	ctx := context.Background()
	literals := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			literals[i] = "NULL"
		case string:
			literals[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case int:
			literals[i] = strconv.Itoa(v)
		case time.Duration:
			literals[i] = fmt.Sprintf("'%d microseconds'", v.Microseconds())
		default:
			t.Fatalf("plantest: argument %d: %T cannot be written as a literal", i+1, a)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, stmt := range []string{`SET LOCAL plan_cache_mode = force_generic_plan`, `PREPARE plantest_generic AS ` + sql} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// A prepared statement outlives the transaction: it goes with it, before the rollback.
	defer func() { _, _ = tx.Exec(ctx, `DEALLOCATE plantest_generic`) }()
	var plan []struct {
		Plan Node `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plantest_generic(`+strings.Join(literals, ", ")+`)`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(plan))
	}
	return plan[0].Plan
}

// RowsReadFrom sums the rows every scan of relation returned, over all its loops (the table
// a DELETE or UPDATE writes is not counted as read).
func (n Node) RowsReadFrom(relation string) float64 {
	var rows float64
	if n.RelationName == relation && n.NodeType != "ModifyTable" {
		rows += n.ActualRows * n.ActualLoops
	}
	for _, child := range n.Plans {
		rows += child.RowsReadFrom(relation)
	}
	return rows
}

// RowsExaminedFrom is RowsReadFrom with the rows each scan read and dropped for its filter:
// every row of relation the plan looked at.
func (n Node) RowsExaminedFrom(relation string) float64 {
	var rows float64
	if n.RelationName == relation && n.NodeType != "ModifyTable" {
		rows += (n.ActualRows + n.RemovedByFilter) * n.ActualLoops
	}
	for _, child := range n.Plans {
		rows += child.RowsExaminedFrom(relation)
	}
	return rows
}

// SeqScans lists the relations the plan reads with a sequential scan, once per scan.
func (n Node) SeqScans() []string {
	var out []string
	if n.NodeType == "Seq Scan" {
		out = append(out, n.RelationName)
	}
	for _, child := range n.Plans {
		out = append(out, child.SeqScans()...)
	}
	return out
}
