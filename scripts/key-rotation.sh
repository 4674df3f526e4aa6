#!/usr/bin/env bash
# Rotates the signing key of a node in the JWKS file mode while a load run of PLAYERS players
# reports, the way an operator whose backend mints its own tokens does it:
#   the JWKS file holds the old key; the load starts with old-key tokens;
#   the new key is published beside it (old + new);
#   the players switch to new-key tokens (loadgen -rotate-at);
#   once the old tokens have expired (TOKEN_TTL after the start), the old key is withdrawn;
#   a probe with a long-lived old-key token, verified (and cached) before the withdrawal, is
#   refused from the node's next read of the file.
# Prints loadgen's report (its 401s by key), when the node picked up each file change (its
# playhead_jwks_keys gauge and its log), and when the probe was first refused. Loopback only;
# every wait is bounded. A database of its own, created afresh, on the dev cluster.
#
#   scripts/key-rotation.sh                       # 2 000 players, 100 s
#   PLAYERS=200 TOKEN_TTL=30s ROTATE_AT=15s DURATION=50 scripts/key-rotation.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

PLAYERS=${PLAYERS:-2000}
PUBLISH_AT=${PUBLISH_AT:-15}   # seconds from the start: the new key published beside the old
ROTATE_AT=${ROTATE_AT:-30s}    # players switch to new-key tokens
TOKEN_TTL=${TOKEN_TTL:-60s}    # lifetime of the players' tokens
WITHDRAW_AFTER=${WITHDRAW_AFTER:-5} # seconds after the old tokens' expiry: the old key withdrawn
DURATION=${DURATION:-100}      # seconds of load in all (a 10 s ramp included)
OUT=${OUT:-$root/.data/key-rotation}
http=${LOAD_HTTP_ADDR:-127.0.0.1:28180}
metrics=${LOAD_METRICS_ADDR:-127.0.0.1:29564}
issuer=https://keys.example.test/
audience=playhead

rm -rf "$OUT"; mkdir -p "$OUT"
go build -o bin/playhead ./cmd/api
go build -o bin/loadgen ./cmd/loadgen
base=$(scripts/devdb.sh)
db=playhead_keyrotation
psql "$base" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
export DATABASE_URL=${base%/playhead*}/$db?sslmode=disable
bin/playhead migrate >/dev/null

# Two key pairs (RS256, as most providers sign), their public JWKS, and the file the node reads.
for k in old new; do
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$OUT/$k.pem" 2>/dev/null
  bin/playhead token --key "$OUT/$k.pem" --kid "$k" --print-jwks > "$OUT/$k.jwks"
done
jwks=$OUT/jwks.json
publish() { # publish FILE...: the union of their keys, replaced by rename as the docs say
  jq -s '{keys: map(.keys[]) }' "$@" > "$jwks.tmp"
  mv "$jwks.tmp" "$jwks"
}
publish "$OUT/old.jwks"

export PLAYHEAD_OIDC_ISSUER=$issuer PLAYHEAD_OIDC_AUDIENCE=$audience PLAYHEAD_JWKS_FILE=$jwks
export PLAYHEAD_OIDC_ADMIN_CLAIM=roles PLAYHEAD_OIDC_ADMIN_VALUE=playhead-admin
unset PLAYHEAD_JWT_SECRET
PLAYHEAD_URL_SIGNING_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
export PLAYHEAD_URL_SIGNING_SECRET
PLAYHEAD_ROLE=api PLAYHEAD_HTTP_ADDR=$http PLAYHEAD_METRICS_ADDR=$metrics PLAYHEAD_LOG_LEVEL=info \
  bin/playhead serve 2> "$OUT/server.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "http://$metrics/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "http://$metrics/readyz" >/dev/null || { echo "the node did not start:" >&2; tail -5 "$OUT/server.log" >&2; exit 1; }

keys() { curl -fs "http://$metrics/metrics" | awk '$1 == "playhead_jwks_keys" { print $2 }'; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
# await_keys N: polls the gauge until the node holds N keys (at most 20 s), prints the wait.
await_keys() {
  local from; from=$(now)
  for _ in $(seq 400); do
    [ "$(keys)" = "$1" ] && { printf '%.2f' "$(since "$from")"; return; }
    sleep 0.05
  done
  echo "the node never held $1 keys" >&2; exit 1
}
status() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "http://$http/v1/playback?limit=1"; }

# The probe: an old-key token living an hour, verified now, so the node caches it.
probe=$(bin/playhead token --key "$OUT/old.pem" --kid old --issuer "$issuer" --audience "$audience" --subject probe --ttl 1h)
[ "$(status "$probe")" = 200 ] || { echo "the probe token is refused before the rotation" >&2; exit 1; }

start=$(now)
bin/loadgen --targets "http://$http" --metrics "http://$metrics/metrics" --database-url "$DATABASE_URL" \
  --players "$PLAYERS" --stages "10s:$PLAYERS,$(( DURATION - 10 ))s:$PLAYERS" --label "key rotation $PLAYERS" \
  -signing-key "$OUT/old.pem" -signing-kid old -rotate-key "$OUT/new.pem" -rotate-kid new \
  -rotate-at "$ROTATE_AT" -token-ttl "$TOKEN_TTL" --json "$OUT/loadgen.json" > "$OUT/loadgen.txt" &
loadgen=$!

sleep "$(echo "$PUBLISH_AT - $(since "$start")" | bc)"
publish "$OUT/old.jwks" "$OUT/new.jwks"
published=$(printf '%.1f' "$(since "$start")")
echo "+${published}s new key published beside the old; the node held 2 keys $(await_keys 2) s later"

withdraw_at=$(( ${TOKEN_TTL%s} + WITHDRAW_AFTER ))
sleep "$(echo "$withdraw_at - $(since "$start")" | bc)"
[ "$(status "$probe")" = 200 ] || { echo "the probe token was refused while its key was published" >&2; exit 1; }
publish "$OUT/new.jwks"
withdrawn=$(now)
echo "+$(printf '%.1f' "$(since "$start")")s old key withdrawn (the old tokens expired at +${TOKEN_TTL}); the node held 1 key $(await_keys 1) s later"
refused=
for _ in $(seq 400); do
  if [ "$(status "$probe")" = 401 ]; then refused=$(printf '%.2f' "$(since "$withdrawn")"); break; fi
  sleep 0.05
done
[ -n "$refused" ] || { echo "the probe's old-key token still works 20 s after the withdrawal" >&2; exit 1; }
echo "the probe's old-key token (valid 1 h, cached) refused 401 ${refused} s after the file changed"

wait "$loadgen"
cat "$OUT/loadgen.txt"
echo "node log:"; grep -h "keys changed" "$OUT/server.log" || true
echo "node: $(curl -fs "http://$metrics/metrics" | grep -E '^playhead_auth_refusals_total\{reason="(unknown_key|expired|bad_signature)"\}' | tr '\n' ' ')"
