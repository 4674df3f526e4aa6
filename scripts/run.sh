#!/usr/bin/env bash
# make run: a local PostgreSQL when DATABASE_URL is unset, a generated JWT secret, the schema,
# a printed dev token, then the service in the foreground (Ctrl-C stops it gracefully).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL=$(scripts/devdb.sh)
  echo "local PostgreSQL: $DATABASE_URL (data in .data/pg)"
fi
export DATABASE_URL
if [ -z "${PLAYHEAD_JWT_SECRET:-}" ]; then
  mkdir -p .data
  [ -s .data/jwt-secret ] || head -c 48 /dev/urandom | base64 | tr -d '\n' > .data/jwt-secret
  PLAYHEAD_JWT_SECRET=$(cat .data/jwt-secret)
fi
export PLAYHEAD_JWT_SECRET

bin/playhead migrate
token=$(bin/playhead token --member 1 --admin --ttl 720h)
addr=${PLAYHEAD_HTTP_ADDR:-:8080}
port=${addr##*:}
cat <<EOT

dev token (member 1, admin, 30 days):
  $token

open the player (signs this browser tab in with the token above):
  http://localhost:$port/#token=$token

try:
  curl -s -X POST localhost:$port/v1/admin/media -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"title":"demo","duration_ms":600000}'
  curl -s -X PUT  localhost:$port/v1/playback/1 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"position_ms":61000}' -w '%{http_code}\n'
  curl -s        localhost:$port/v1/playback -H "Authorization: Bearer $token"

EOT
exec bin/playhead serve
