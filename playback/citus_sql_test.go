package playback

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// statementViolations checks one statement's text against the Citus plan:
//   - an ON CONFLICT on a distributed table names its distribution column in the conflict
//     target, and its DO UPDATE reads only excluded.*, the row it updates, parameters and
//     constants: no subquery, no other table, no clock (Citus pushes the clause down to the
//     shard, where nothing else is at hand and every shard's clock would differ);
//   - no statement joins a coordinator table with a distributed one;
//   - a single-member statement pins every distributed table it reads or writes to one
//     member parameter (alias.member_id = $n, or $n in the member_id slot of VALUES), so Citus
//     routes it to one shard;
//   - a bulk statement (the flush) reads no distributed table: it writes rows of many members,
//     which Citus splits per shard, and joins only reference tables and its own CTEs.
//
// It reads tokens, not a parse tree: a pin is looked for anywhere in the statement, so two
// references under one alias share it. The statements checked keep one alias per scope.
func statementViolations(st hotStatement, plan map[string]placement) []string {
	toks := tokenize(st.sql)
	refs := tableRefs(toks, plan)
	var out []string

	var dist, coord []string
	for _, r := range refs {
		switch plan[r.table].kind {
		case distributed:
			dist = appendNew(dist, r.table)
		case coordinator:
			coord = appendNew(coord, r.table)
		}
	}
	for _, c := range coord {
		for _, d := range dist {
			out = append(out, fmt.Sprintf("joins coordinator table %s with distributed table %s", c, d))
		}
	}

	out = append(out, conflictViolations(toks, refs, plan)...)

	params := map[string]bool{}
	for _, r := range refs {
		p := plan[r.table]
		if p.kind != distributed {
			continue
		}
		if !st.singleMember {
			if !r.write {
				out = append(out, fmt.Sprintf("bulk statement reads distributed table %s", r.table))
			}
			continue
		}
		param, problem := memberPin(toks, r, p.column)
		if problem != "" {
			out = append(out, problem)
			continue
		}
		params[param] = true
	}
	if len(params) > 1 {
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out = append(out, "pins members by different parameters "+strings.Join(keys, ", "))
	}
	return out
}

func appendNew(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

var sqlTokens = regexp.MustCompile(`'(?:[^']|'')*'|"(?:[^"]|"")*"|\$\d+|::|<=|>=|<>|[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)?|\S`)

var sqlComment = regexp.MustCompile(`--[^\n]*`)

// tokenize splits sql into tokens; a quoted identifier becomes the name it quotes, so that
// "playback" is checked as playback.
func tokenize(sql string) []string {
	toks := sqlTokens.FindAllString(sqlComment.ReplaceAllString(sql, ""), -1)
	for i, tok := range toks {
		if len(tok) >= 2 && tok[0] == '"' {
			toks[i] = strings.ReplaceAll(tok[1:len(tok)-1], `""`, `"`)
		}
	}
	return toks
}

// is reports whether tok is the keyword kw, in any case.
func is(tok, kw string) bool { return strings.EqualFold(tok, kw) }

// notAlias are the words that may follow a table name without being its alias.
var notAlias = []string{"where", "on", "join", "left", "right", "inner", "full", "cross", "natural", "order", "group",
	"union", "limit", "set", "values", "returning", "using", "with", "select", "and", "or", "having", "window", "offset",
	"for", "lateral", "default"}

// tableRef is one place a statement names a planned table.
type tableRef struct {
	table, alias string
	write        bool // INSERT INTO or UPDATE
	at           int  // index of the table name in the tokens
}

func tableRefs(toks []string, plan map[string]placement) []tableRef {
	var refs []tableRef
	for i := 0; i+1 < len(toks); i++ {
		kw := toks[i]
		write := is(kw, "into") || is(kw, "update") && (i == 0 || !is(toks[i-1], "do"))
		// A comma before a planned name is a FROM list's next table (FROM a, b): no column or
		// alias of the checked statements is named like a table.
		if !write && !is(kw, "from") && !is(kw, "join") && kw != "," {
			continue
		}
		name := strings.ToLower(toks[i+1])
		if _, ok := plan[name]; !ok || i+2 < len(toks) && toks[i+2] == "(" && !write {
			continue // a CTE, a function such as unnest(…), or an unplanned name
		}
		r := tableRef{table: name, alias: name, write: write, at: i + 1}
		if j := i + 2; j < len(toks) {
			if is(toks[j], "as") && j+1 < len(toks) {
				r.alias = toks[j+1]
			} else if isIdent(toks[j]) && !slices.ContainsFunc(notAlias, func(w string) bool { return is(toks[j], w) }) {
				r.alias = toks[j]
			}
		}
		refs = append(refs, r)
	}
	return refs
}

var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isIdent(tok string) bool { return identPattern.MatchString(tok) }

// clockAndVolatile are functions a DO UPDATE must not call: each shard would evaluate them
// itself (and Citus refuses volatile functions in distributed modifications).
var clockAndVolatile = []string{"now", "statement_timestamp", "clock_timestamp", "transaction_timestamp", "timeofday",
	"current_timestamp", "localtimestamp", "current_time", "current_date", "random", "nextval", "gen_random_uuid"}

// conflictViolations checks every ON CONFLICT clause against the table its INSERT writes.
func conflictViolations(toks []string, refs []tableRef, plan map[string]placement) []string {
	var out []string
	for i := 0; i+1 < len(toks); i++ {
		if !is(toks[i], "on") || !is(toks[i+1], "conflict") {
			continue
		}
		var target *tableRef
		for k := range refs {
			if refs[k].write && refs[k].at < i {
				target = &refs[k]
			}
		}
		if target == nil {
			continue // an INSERT into an unplanned table
		}
		p := plan[target.table]
		j := i + 2
		var cols []string
		if j < len(toks) && toks[j] == "(" {
			for j++; j < len(toks) && toks[j] != ")"; j++ {
				if isIdent(toks[j]) {
					cols = append(cols, strings.ToLower(toks[j]))
				}
			}
			j++
		}
		if p.kind == distributed && !slices.Contains(cols, p.column) {
			out = append(out, fmt.Sprintf("conflict target (%s) on %s lacks %s", strings.Join(cols, ", "), target.table, p.column))
		}
		if j+2 >= len(toks) || !is(toks[j], "do") || !is(toks[j+1], "update") {
			continue
		}
		out = append(out, doUpdateViolations(toks[j+2:], target)...)
	}
	return out
}

// doUpdateViolations checks a DO UPDATE SET … WHERE … clause: it ends at RETURNING, at the
// parenthesis closing its CTE, or at the end of the statement.
func doUpdateViolations(toks []string, target *tableRef) []string {
	var out []string
	depth := 0
	for k := 0; k < len(toks); k++ {
		tok := toks[k]
		switch {
		case tok == "(":
			depth++
		case tok == ")":
			depth--
		}
		if depth < 0 || depth == 0 && is(tok, "returning") {
			break
		}
		lower := strings.ToLower(tok)
		switch {
		case is(tok, "select"):
			out = append(out, fmt.Sprintf("ON CONFLICT DO UPDATE on %s reads a subquery", target.table))
		case slices.Contains(clockAndVolatile, lower):
			out = append(out, fmt.Sprintf("ON CONFLICT DO UPDATE on %s calls %s()", target.table, lower))
		case isIdent(tok) && k+2 < len(toks) && toks[k+1] == "." && !is(tok, "excluded") && tok != target.alias && !is(tok, target.table):
			out = append(out, fmt.Sprintf("ON CONFLICT DO UPDATE on %s refers to %s.%s", target.table, tok, toks[k+2]))
		}
	}
	return out
}

var memberParam = regexp.MustCompile(`^\$\d+$`)

// memberPin returns the parameter that pins ref to one member, or why there is none.
func memberPin(toks []string, ref tableRef, column string) (param, problem string) {
	if ref.write {
		return insertPin(toks, ref, column)
	}
	for k := 0; k+2 < len(toks); k++ {
		// alias.column = $n, $n = alias.column, or (unaliased) column = $n, and no OR beside it
		// in its condition (p.member_id = $1 OR … reads every shard).
		if is(toks[k], column) && (k >= 2 && toks[k-1] == "." && toks[k-2] == ref.alias || ref.alias == ref.table && (k == 0 || toks[k-1] != ".")) {
			if toks[k+1] == "=" && memberParam.MatchString(toks[k+2]) && !orBeside(toks, k) {
				return toks[k+2], ""
			}
			if k >= 4 && toks[k-1] == "." && toks[k-3] == "=" && memberParam.MatchString(toks[k-4]) && !orBeside(toks, k) {
				return toks[k-4], ""
			}
		}
	}
	return "", fmt.Sprintf("reads %s %s without %s.%s = $n", ref.table, ref.alias, ref.alias, column)
}

// conditionEnds are the words that end a condition, looking away from a term in it.
var conditionEnds = []string{"where", "on", "having", "select", "from", "join", "group", "order", "limit", "offset",
	"returning", "union", "window", "for", "then", "when", "else", "end"}

// orBeside reports whether the term at toks[k] is joined by OR to another at its own
// parenthesis depth, within its condition: then it does not restrict the whole condition.
func orBeside(toks []string, k int) bool {
	for step := -1; step <= 1; step += 2 {
		depth := 0
		for j := k + step; j >= 0 && j < len(toks); j += step {
			switch {
			case toks[j] == "(":
				depth += step
			case toks[j] == ")":
				depth -= step
			}
			if depth < 0 || depth == 0 && slices.ContainsFunc(conditionEnds, func(w string) bool { return is(toks[j], w) }) {
				break
			}
			if depth == 0 && is(toks[j], "or") {
				return true
			}
		}
	}
	return false
}

// insertPin finds the value an INSERT … (columns) VALUES (…) gives the distribution column.
func insertPin(toks []string, ref tableRef, column string) (string, string) {
	k := ref.at + 1
	if k < len(toks) && is(toks[k], "as") {
		k += 2
	}
	cols, k := list(toks, k)
	if k >= len(toks) || !is(toks[k], "values") {
		return "", fmt.Sprintf("writes %s from a SELECT, so its member cannot be read from the statement", ref.table)
	}
	vals, _ := list(toks, k+1)
	i := slices.IndexFunc(cols, func(c []string) bool { return len(c) == 1 && is(c[0], column) })
	if i < 0 || i >= len(vals) {
		return "", fmt.Sprintf("writes %s without %s", ref.table, column)
	}
	if v := vals[i]; len(v) == 0 || !memberParam.MatchString(v[0]) {
		return "", fmt.Sprintf("writes %s with %s = %s, not a parameter", ref.table, column, strings.Join(v, ""))
	}
	return vals[i][0], ""
}

// list splits the parenthesised, comma-separated list at toks[k] into its items' tokens and
// returns the index after its closing parenthesis.
func list(toks []string, k int) ([][]string, int) {
	if k >= len(toks) || toks[k] != "(" {
		return nil, k
	}
	items := [][]string{nil}
	depth := 0
	for k++; k < len(toks); k++ {
		switch toks[k] {
		case "(":
			depth++
		case ")":
			if depth == 0 {
				return items, k + 1
			}
			depth--
		case ",":
			if depth == 0 {
				items = append(items, nil)
				continue
			}
		}
		items[len(items)-1] = append(items[len(items)-1], toks[k])
	}
	return items, k
}
