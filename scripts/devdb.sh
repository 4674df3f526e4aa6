#!/usr/bin/env bash
# Starts (or reuses) a throwaway PostgreSQL cluster under .data/pg and prints its URL.
# PostgreSQL refuses to run as root, so as root the cluster belongs to the postgres user.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.data/pg"
port=${PLAYHEAD_DEV_PG_PORT:-54329}

bindir=$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -n 1)")")
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

mkdir -p "$dir"
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
if [ ! -f "$dir/data/PG_VERSION" ]; then
  as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
fi
if ! as_pg "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
fi
as_pg "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'playhead'" | grep -q 1 ||
  as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres playhead
echo "postgres://postgres@127.0.0.1:$port/playhead?sslmode=disable"
