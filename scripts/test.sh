#!/usr/bin/env bash
# make test's test run: the links of the Markdown docs (make linkcheck), every package's tests,
# the hostile-input suite with its cases per class (make hostile), one round of the rolling
# restart and the node-loss test with their counts (make rolling-restart, make node-loss), a
# short run of each fuzz target (make fuzz), and at the end the list of what failed. go test prints its failures per package, far above
# the end of a long run; this repeats them as the last lines, and exits 1.
#
#   GO=go MAKE=make FUZZTIME=5s scripts/test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

GO=${GO:-go}
MAKE=${MAKE:-make}
FUZZTIME=${FUZZTIME:-5s}
log=$(mktemp "${TMPDIR:-/tmp}/playhead-test.XXXXXX")
trap 'rm -f "$log"' EXIT

failed=0
"$MAKE" --no-print-directory linkcheck 2>&1 | tee -a "$log" || failed=1
"$GO" test -count=1 -timeout 25m -skip '^(TestHostileInput|TestCluster_RollingRestart|TestCluster_NodeLoss)$' ./... 2>&1 | tee "$log" || failed=1
"$MAKE" --no-print-directory hostile 2>&1 | tee -a "$log" || failed=1
"$MAKE" --no-print-directory rolling-restart ROLLING_ROUNDS=1 2>&1 | tee -a "$log" || failed=1
"$MAKE" --no-print-directory node-loss 2>&1 | tee -a "$log" || failed=1
"$MAKE" --no-print-directory fuzz FUZZTIME="$FUZZTIME" 2>&1 | tee -a "$log" || failed=1

if [ "$failed" -ne 0 ]; then
	echo
	echo "make test FAILED. Failed tests and packages (details above):"
	# Failed tests and subtests, failed packages (with build failures and timeouts), panics.
	grep -E '^[[:space:]]*--- FAIL: |^FAIL[[:space:]]|^panic: ' "$log" | sed 's/^/  /' ||
		echo "  (go test printed no FAIL line: see the output above)"
	exit 1
fi
