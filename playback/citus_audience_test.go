package playback

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// audienceStatements reads the SQL constants of package audience (../audience/audience.go),
// which this package cannot import for its tests without a cycle of test helpers: the
// rollup reads playback, so the Citus plan's rules apply to it as to the hot statements.
func audienceStatements(t *testing.T, names ...string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../audience/audience.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i >= len(vs.Values) {
				break
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out[name.Name] = s
			}
		}
		return true
	})
	for _, n := range names {
		if out[n] == "" {
			t.Fatalf("audience/audience.go has no string constant %s", n)
		}
	}
	return out
}

// The audience rollup (audience.rollupSQL) reads every playback row of the media it takes and
// takes them from audience_dirty, a coordinator table in the plan: one statement joining a
// coordinator table with the distributed one, which the plan's rules refuse for every hot
// statement. It is not in hotStatements, so TestSchemaAndHotStatementsAreCitusReady never
// looked at it.
func TestAudienceRollupFollowsTheCitusPlan(t *testing.T) {
	sql := audienceStatements(t, "rollupSQL")["rollupSQL"]
	// The rollup reads many members' rows on purpose (an analytical read across shards), so
	// the flush's rule for bulk statements is not the one that matters here; the join is.
	for _, v := range statementViolations(hotStatement{name: "audience rollup (audience.Rollup)", sql: sql}, citusPlan) {
		if !strings.HasPrefix(v, "bulk statement reads distributed table") {
			t.Errorf("audience rollup: %s", v)
		}
	}
}
