#!/bin/bash
# The entrypoint of localhost/playhead-postgres: on the first start (an empty PGDATA) makes the
# cluster with POSTGRES_PASSWORD for the superuser postgres and POSTGRES_DB created, accepting
# password (SCRAM) connections from the network; then runs PostgreSQL in the foreground.
set -euo pipefail

: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
db=${POSTGRES_DB:-playhead}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=peer --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  # Single-user mode: no server (and no port) is up before the cluster is complete.
  echo "CREATE DATABASE \"$db\"" | postgres --single -D "$PGDATA" postgres >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
