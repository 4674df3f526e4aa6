#!/usr/bin/env bash
# Runs the load report of docs/benchmarks/README.md: for each write mode, a fresh Playhead (role api)
# on the local dev PostgreSQL, and the Go load generator at each player count. Loopback only;
# every run is bounded by its stages. Output: one markdown table per mode in $OUT.
#
#   scripts/loadtest.sh                    # modes writebehind and sync, 2k 5k 10k 50k 100k players
#   MODES=writebehind SIZES="2000 100000" HOLD=30s scripts/loadtest.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

MODES=${MODES:-"writebehind sync"}
SIZES=${SIZES:-"2000 5000 10000 50000 100000"}
HOLD=${HOLD:-30s}
OUT=${OUT:-$root/.data/loadtest}
mkdir -p "$OUT"

go build -o bin/playhead ./cmd/api
go build -o bin/loadgen ./cmd/loadgen
export DATABASE_URL=${DATABASE_URL:-$(scripts/devdb.sh)}
if [ -z "${PLAYHEAD_JWT_SECRET:-}" ]; then
  mkdir -p .data
  [ -s .data/jwt-secret ] || head -c 48 /dev/urandom | base64 | tr -d '\n' > .data/jwt-secret
  PLAYHEAD_JWT_SECRET=$(cat .data/jwt-secret)
fi
export PLAYHEAD_JWT_SECRET
bin/playhead migrate >/dev/null

http=${LOAD_HTTP_ADDR:-127.0.0.1:28080}
metrics=${LOAD_METRICS_ADDR:-127.0.0.1:29464}
for mode in $MODES; do
  table="$OUT/$mode.md"
  : > "$table"
  for players in $SIZES; do
    # Start each run from empty playback and media tables, so runs do not carry rows over.
    psql "$DATABASE_URL" -qc "TRUNCATE playback; DELETE FROM media WHERE title LIKE 'loadgen %' AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.subject_id = media.id)" >/dev/null
    # The players' ramp: 2 000 new players a second at most (each opens its media with a POST).
    ramp=$(( players / 2000 > 10 ? players / 2000 : 10 ))s
    PLAYHEAD_ROLE=api PLAYHEAD_HTTP_ADDR=$http PLAYHEAD_METRICS_ADDR=$metrics PLAYHEAD_LOG_LEVEL=warn \
      PLAYHEAD_PLAYBACK_WRITE_MODE=$mode bin/playhead serve 2> "$OUT/$mode-$players.server.log" &
    server=$!
    for _ in $(seq 100); do curl -fs "http://$metrics/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    echo "== $mode, $players players (ramp $ramp, hold $HOLD)"
    bin/loadgen --targets "http://$http" --metrics "http://$metrics/metrics" --database-url "$DATABASE_URL" \
      --players "$players" --ramp "$ramp" --duration "$HOLD" --label "$mode $players" \
      --member-start $(( 10000000 + players )) --markdown "$table" --json "$OUT/$mode-$players.json" | tee "$OUT/$mode-$players.txt"
    kill -TERM "$server"
    wait "$server" || echo "server exited with $? (see $OUT/$mode-$players.server.log)"
  done
  echo; echo "### $mode"; cat "$table"
done
