#!/usr/bin/env bash
# Measures what a database outage costs Playhead in memory (docs/internals/reliability.md): a fresh
# `playhead serve` (role api, default settings) on the local development cluster, the Go load
# generator at PLAYERS players (one PUT every 5 s each: 100 000 players = 20 000 PUTs/s), and,
# once the load is steady, PostgreSQL stopped for OUTAGE and started again. Playhead's
# /metrics is sampled every second into a CSV; the summary prints the peak RSS and held keys
# before, during and after the outage. Loopback only; every stage is bounded.
#
# The media cache's defaults hold: an entry that expires while the database is away is served
# stale (PLAYHEAD_CACHE_MAX_STALE, 10 min), so PUTs for known media keep being accepted.
#
#   scripts/outage-memory.sh                        # 100 000 players, a 60 s outage
#   PLAYERS=50000 OUTAGE=30s scripts/outage-memory.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

PLAYERS=${PLAYERS:-100000}
OUTAGE=${OUTAGE:-60s}
STEADY=${STEADY:-30s}   # load before the outage, after the ramp
AFTER=${AFTER:-60s}     # load after the outage
OUT=${OUT:-$root/.data/outage}
mkdir -p "$OUT"
secs() { local d=$1; case $d in *m) echo $(( ${d%m} * 60 ));; *s) echo "${d%s}";; *) echo "$d";; esac; }
ramp=$(( PLAYERS / 2000 > 10 ? PLAYERS / 2000 : 10 ))
hold=$(( $(secs "$STEADY") + $(secs "$OUTAGE") + $(secs "$AFTER") ))

go build -o bin/playhead ./cmd/api
go build -o bin/loadgen ./cmd/loadgen
export DATABASE_URL=${DATABASE_URL:-$(scripts/devdb.sh)}
pgdata="$root/.data/pg/data"
bindir=$(dirname "$(readlink -f "$(command -v pg_ctl 2>/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl | tail -n 1)")")
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ -z "${PLAYHEAD_JWT_SECRET:-}" ]; then
  mkdir -p .data
  [ -s .data/jwt-secret ] || head -c 48 /dev/urandom | base64 | tr -d '\n' > .data/jwt-secret
  PLAYHEAD_JWT_SECRET=$(cat .data/jwt-secret)
fi
export PLAYHEAD_JWT_SECRET
bin/playhead migrate >/dev/null
psql "$DATABASE_URL" -qc "TRUNCATE playback; DELETE FROM media WHERE title LIKE 'loadgen %' AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.subject_id = media.id)" >/dev/null

http=${LOAD_HTTP_ADDR:-127.0.0.1:28180}
metrics=${LOAD_METRICS_ADDR:-127.0.0.1:29564}
PLAYHEAD_ROLE=api PLAYHEAD_HTTP_ADDR=$http PLAYHEAD_METRICS_ADDR=$metrics PLAYHEAD_LOG_LEVEL=warn \
  PLAYHEAD_SPILL_DIR="$OUT/spill" bin/playhead serve 2> "$OUT/server.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; as_pg "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1 || scripts/devdb.sh >/dev/null' EXIT
for _ in $(seq 100); do curl -fs "http://$metrics/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

# One line a second: seconds since start, phase, RSS, Go heap in use, held keys, held for
# retry, oldest held for retry, positions lost (all reasons).
phase="$OUT/phase"; echo ramp > "$phase"
sample() {
  local t=0
  echo "t,phase,rss_bytes,heap_inuse_bytes,held_keys,retry_held_keys,retry_oldest_age_seconds,lost_total"
  while kill -0 "$server" 2>/dev/null; do
    curl -fs "http://$metrics/metrics" 2>/dev/null | awk -v t="$t" -v p="$(cat "$phase")" '
      /^process_resident_memory_bytes /{rss=$2} /^go_memstats_heap_inuse_bytes /{heap=$2}
      /^playhead_playback_buffer_held_keys /{held=$2} /^playhead_playback_buffer_retry_held_keys /{retry=$2}
      /^playhead_playback_buffer_retry_oldest_age_seconds /{age=$2} /^playhead_playback_buffer_lost_total/{lost+=$2}
      END{printf "%d,%s,%.0f,%.0f,%d,%d,%.1f,%d\n", t, p, rss, heap, held, retry, age, lost}' || true
    sleep 1; t=$((t + 1))
  done
}
sample > "$OUT/samples.csv" &
sampler=$!

echo "== $PLAYERS players (ramp ${ramp}s, then ${hold}s: $STEADY steady, $OUTAGE outage, $AFTER after)"
bin/loadgen --targets "http://$http" --metrics "http://$metrics/metrics" --players "$PLAYERS" \
  --ramp "${ramp}s" --duration "${hold}s" --list-every 0 --member-start $(( 20000000 + PLAYERS )) \
  --label "outage $PLAYERS" --json "$OUT/loadgen.json" > "$OUT/loadgen.txt" &
loadgen=$!
sleep $(( ramp ))
echo steady > "$phase"; sleep "$(secs "$STEADY")"
echo outage > "$phase"; as_pg "$bindir/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
sleep "$(secs "$OUTAGE")"
scripts/devdb.sh >/dev/null; echo after > "$phase"
wait "$loadgen" || echo "loadgen exited with $?"
echo stop > "$phase"
kill -TERM "$server"; wait "$server" || echo "server exited with $? (see $OUT/server.log)"
wait "$sampler" || true
trap - EXIT

cat "$OUT/loadgen.txt"
echo "rows in playback: $(psql "$DATABASE_URL" -tAc 'SELECT count(*) FROM playback')"
awk -F, 'NR > 1 { if ($3 > rss[$2]) rss[$2] = $3; if ($5 > held[$2]) held[$2] = $5; if ($6 > retry[$2]) retry[$2] = $6
                   if ($7 > age[$2]) age[$2] = $7; lost = $8 }
  END { for (p in rss) printf "%-7s peak RSS %6.1f MiB, peak held keys %6d, peak held for retry %6d, oldest held %5.1f s\n", p, rss[p] / 1048576, held[p], retry[p], age[p]
        printf "positions lost (all reasons) at the end: %d\n", lost }' "$OUT/samples.csv"
