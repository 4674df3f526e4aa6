#!/usr/bin/env bash
# The progress reads' load run of docs/benchmarks/ (the progress-reads runs): the same load
# against a baseline binary (BASE_REF, default main) and this tree's binary, RUNS times
# alternately, each on freshly seeded data (scripts/seed-progress.sql). Players report every 5 s
# and read their continue-watching list and the 500-lesson collection every LIST_EVERY reports.
# Loopback only; every run is bounded by its stages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

PLAYERS=${PLAYERS:-2000}
HOLD=${HOLD:-30s}
RUNS=${RUNS:-3}
LIST_EVERY=${LIST_EVERY:-5}
BASE_REF=${BASE_REF:-main}
OUT=${OUT:-$root/.data/loadtest-progress}
START=1000000
mkdir -p "$OUT" bin

go build -o bin/playhead ./cmd/api
go build -o bin/loadgen ./cmd/loadgen
base_src=$(mktemp -d)
trap 'rm -rf "$base_src"' EXIT
git archive "$BASE_REF" | tar -x -C "$base_src"
(cd "$base_src" && go build -o "$root/bin/playhead-base" ./cmd/api)

export DATABASE_URL=${DATABASE_URL:-$(scripts/devdb.sh)}
if [ -z "${PLAYHEAD_JWT_SECRET:-}" ]; then
  [ -s .data/jwt-secret ] || head -c 48 /dev/urandom | base64 | tr -d '\n' > .data/jwt-secret
  PLAYHEAD_JWT_SECRET=$(cat .data/jwt-secret)
fi
export PLAYHEAD_JWT_SECRET
bin/playhead migrate >/dev/null

http=${LOAD_HTTP_ADDR:-127.0.0.1:28180}
metrics=${LOAD_METRICS_ADDR:-127.0.0.1:29564}
for run in $(seq "$RUNS"); do
  for which in base branch; do
    binary=bin/playhead; [ "$which" = base ] && binary=bin/playhead-base
    psql "$DATABASE_URL" -qc "TRUNCATE playback, playback_last_finished; DELETE FROM import_rows; DELETE FROM imports;
      DELETE FROM media WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.subject_id = media.id)" >/dev/null
    # Each binary reads with its own continue-watching index: main's is (member_id, event_time),
    # this branch's puts finished after member_id (migration 00007).
    index="(member_id, finished, event_time DESC, media_id DESC)"
    [ "$which" = base ] && index="(member_id, event_time DESC, media_id DESC)"
    psql "$DATABASE_URL" -qc "DROP INDEX playback_continue_idx;
      CREATE INDEX playback_continue_idx ON playback $index WHERE NOT hidden" >/dev/null
    psql "$DATABASE_URL" -q -v start=$START -v players="$PLAYERS" -f scripts/seed-progress.sql >/dev/null
    PLAYHEAD_ROLE=api PLAYHEAD_HTTP_ADDR=$http PLAYHEAD_METRICS_ADDR=$metrics PLAYHEAD_LOG_LEVEL=warn \
      $binary serve 2> "$OUT/$which-$run.server.log" &
    server=$!
    for _ in $(seq 100); do curl -fs "http://$metrics/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    echo "== run $run, $which ($binary), $PLAYERS players"
    bin/loadgen --targets "http://$http" --metrics "http://$metrics/metrics" --players "$PLAYERS" \
      --ramp 10s --duration "$HOLD" --list-every "$LIST_EVERY" --collection "loadgen course" \
      --member-start $START --label "$which run $run" --json "$OUT/$which-$run.json" > "$OUT/$which-$run.txt"
    grep -E "GET list|GET collection|PUT position" "$OUT/$which-$run.txt" || true
    kill -TERM "$server"
    wait "$server" || echo "server exited with $? (see $OUT/$which-$run.server.log)"
  done
done
