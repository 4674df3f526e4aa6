#!/usr/bin/env bash
# make mutants: every promise of the reliability suite is checked by breaking the code that
# keeps it. Each file in mutants/ is a small patch of production code, headed by what it breaks
# and which tests must catch it:
#
#   Breaks: flush without coalescing: two offers for one key are both written
#   Promise: write path: coalesce and sort before the flush
#   Tests: ./buffer ^TestBuffer_CoalescesAndSorts$
#   Env: PLAYHEAD_CHAOS_ROUNDS=1            (optional: variables for the test run)
#
#   diff --git a/buffer/buffer.go b/buffer/buffer.go
#   ...
#
# (git apply ignores the lines before the first "diff --git".) The working tree is copied once
# to a scratch directory (never touched itself); for each patch the script applies it there,
# checks that the package and its tests still compile (a patch that does not build proves
# nothing), runs only the named tests, and reverts the patch. The breakage is CAUGHT when the
# tests fail, MISSED when they pass. It prints one table row per patch and exits 1 on any miss
# or on a patch that no longer applies or builds.
#
#   scripts/mutants.sh                      # every patch in mutants/
#   scripts/mutants.sh mutants/07-*.patch   # some of them
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
TIMEOUT=${MUTANT_TIMEOUT:-8m}

patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
	patches=(mutants/*.patch)
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/playhead-mutants.XXXXXX")
logs=$scratch/logs
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tree" "$logs"
# The working tree as it is (uncommitted edits included), without what the build does not
# read. web/static/vendor is made by `make web` and embedded, so it comes along.
tar --exclude=./.git --exclude=./node_modules --exclude=./bin --exclude=./.data -cf - . | tar -xf - -C "$scratch/tree"
# Tests that check with npm's tools (hls-parser, the browser's) find them through the tree.
[ -d node_modules ] && ln -s "$root/node_modules" "$scratch/tree/node_modules"
cd "$scratch/tree"

header() { sed -n "s/^$2: //p" "$1" | head -1; }

missed=0 broken=0
printf '| %s | %s | %s |\n' "breakage" "tests" "result"
printf '| --- | --- | --- |\n'
for p in "${patches[@]}"; do
	case $p in
	/*) patch=$p ;; # absolute: a patch kept outside the tree is fine
	*) patch=$root/$p ;;
	esac
	name=$(basename "$patch" .patch)
	breaks=$(header "$patch" Breaks)
	read -r pkg pattern <<<"$(header "$patch" Tests)"
	env=$(header "$patch" Env)
	log=$logs/$name.log
	result=
	if [ -z "$pkg" ] || [ -z "$pattern" ]; then
		result="BROKEN PATCH (no Tests: line)"
	elif ! git apply "$patch" 2>"$log"; then
		result="BROKEN PATCH (does not apply: $(head -1 "$log"))"
	else
		# vet compiles the package with its tests: a compile error is not a caught breakage.
		if ! { "$GO" build ./... && "$GO" vet "$pkg"; } >"$log" 2>&1; then
			result="BROKEN PATCH (does not build: $(grep -m1 -E '\.go:[0-9]+' "$log"))"
		else
			start=$SECONDS
			# shellcheck disable=SC2086 # env is a list of NAME=value words
			env $env "$GO" test -count=1 -timeout "$TIMEOUT" -run "$pattern" -v "$pkg" >"$log" 2>&1
			status=$?
			took=$((SECONDS - start))
			ran=$(grep -c -E '^=== RUN' "$log")
			if [ "$ran" -eq 0 ]; then
				result="BROKEN PATCH (no test matches $pattern)"
			elif [ $status -ne 0 ]; then
				failed=$(grep -m1 -oE -- '--- FAIL: [^ ]+' "$log" | sed 's/--- FAIL: //')
				if [ -z "$failed" ] && grep -q 'panic: test timed out' "$log"; then
					failed="the test hung: timed out after $TIMEOUT"
				fi
				result="caught (${failed:-exit $status}, ${took} s)"
			else
				result="MISSED (${took} s)"
			fi
		fi
		git apply -R "$patch" || { echo "could not revert $name" >&2; exit 2; }
	fi
	case $result in
	caught*) ;;
	MISSED*) missed=$((missed + 1)) ;;
	*) broken=$((broken + 1)) ;;
	esac
	printf '| %s: %s | `%s` `%s` | %s |\n' "$name" "$breaks" "$pkg" "$pattern" "$result"
	if [[ $result != caught* ]]; then
		tail -n 15 "$log" | sed 's/^/    /' >&2
	fi
done
echo
echo "${#patches[@]} breakages: $((${#patches[@]} - missed - broken)) caught, $missed missed, $broken broken patches"
[ $missed -eq 0 ] && [ $broken -eq 0 ]
