#!/usr/bin/env bash
# Per-statement latency of the progress reads (docs/benchmarks/, the progress-reads runs):
# a fresh PostgreSQL cluster in a temporary directory, this tree's migrations, the data of
# scripts/seed-progress.sql, then pgbench on each statement, alternating, ROUNDS times:
#   main-list     main's continue-watching list (with main's index, created for the run)
#   prev-list     this branch's list before playback_last_finished (PREV_REF's listSQL)
#   list          this tree's listSQL
#   collection    this tree's 500-item collection read with progress
# Members are drawn among the seeded players. Loopback only; bounded by ROUNDS × SECONDS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PLAYERS=${PLAYERS:-2000}
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-5}
PORT=${PORT:-54477}
PREV_REF=${PREV_REF:-cee530e}
START=1000000
pgbin=/usr/lib/postgresql/15/bin
work=$(mktemp -d /tmp/bench-progress.XXXXXX)
chown postgres "$work"
stop() { runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap stop EXIT
runuser -u postgres -- "$pgbin/initdb" -D "$work/data" -U postgres --auth=trust -E UTF8 >/dev/null
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/data" -o "-p $PORT -k $work -c listen_addresses=127.0.0.1" \
  -l "$work/data/server.log" -w start >/dev/null
export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"
go build -o "$work/playhead" ./cmd/api
PLAYHEAD_JWT_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n') "$work/playhead" migrate >/dev/null
psql "$DATABASE_URL" -q -v start=$START -v players="$PLAYERS" -f scripts/seed-progress.sql >/dev/null
psql "$DATABASE_URL" -qc "CREATE INDEX playback_main_continue_idx ON playback (member_id, event_time DESC, media_id DESC) WHERE NOT hidden; ANALYZE playback" >/dev/null

# sqlconst prints a Go raw-string constant's SQL from a file.
sqlconst() {
  awk -v name="$1" '$0 ~ "^const " name " = `" {on=1; next} on && /`/ {sub(/`.*/, ""); print; exit} on {print}'
}
# listparams puts pgbench's variables in a list statement: member, first page, 21 rows.
listparams() { sed -e 's/\$1/:member/g' -e 's/\$2/NULL/g' -e 's/\$3/0/g' -e 's/\$4/21/g'; }
last=$((START + PLAYERS - 1))
{ echo "\\set member random($START, $last)"; sqlconst listSQL < playback/list.go | listparams; echo ";"; } > "$work/list.sql"
{ echo "\\set member random($START, $last)"; git show "$PREV_REF:playback/list.go" | sqlconst listSQL | listparams; echo ";"; } > "$work/prev-list.sql"
{ echo "\\set member random($START, $last)"; sqlconst progressSQL < collection/store.go | sed -e "s/\\\$1/'loadgen course'/" -e 's/\$2/:member/g'; echo ";"; } > "$work/collection.sql"
cat > "$work/main-list.sql" <<SQL
\\set member random($START, $last)
SELECT p.media_id, m.title, p.position_ms, coalesce(m.duration_ms, 0), p.event_time
FROM playback p JOIN media m ON m.id = p.media_id
WHERE p.member_id = :member AND NOT p.hidden
  AND (NULL::timestamptz IS NULL OR (p.event_time, p.media_id) < (NULL, 0))
  AND m.status = 'READY' AND (m.visibility = 'PUBLIC' OR m.owner_id = :member)
ORDER BY p.event_time DESC, p.media_id DESC LIMIT 21;
SQL
for round in $(seq "$ROUNDS"); do
  for stmt in main-list prev-list list collection; do
    ms=$(pgbench -n -M prepared -c 2 -T "$SECONDS_PER" -f "$work/$stmt.sql" "$DATABASE_URL" 2>/dev/null |
      awk '/latency average/ {print $4}')
    echo "round $round $stmt ${ms} ms (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
