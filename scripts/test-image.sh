#!/usr/bin/env bash
# make test-image: compose.yaml's topology from the images of make image, checked end to end
# (docs/operations/container.md), with podman-compose (Debian 12's 1.0.3; compose.yaml says what it
# lacks, and this script does those parts itself):
#
#   1. postgres and seaweedfs up; the bucket made and the schema migrated by the one-shots
#      (each must exit 0); the api and worker nodes and Prometheus up, each node healthy by its
#      image's HEALTHCHECK; the api's start measured, container start to /readyz 200;
#   2. both nodes run as a non-root user on a read-only root file system (even root's write to
#      / fails);
#   3. a player's position: PUT, then read back;
#   4. an upload (a 2 s video ffmpeg makes here) through the API to READY;
#   4b. SeaweedFS answers only to its keys: of the ports it listens on, only S3's are on the
#      network; from another container on the compose network (the api node) every other one
#      (master, volume server, filer: HTTP and gRPC) refuses the connection, and S3 answers
#      requests without keys 403 (the object stays; a signed request reads it);
#   5. Prometheus scrapes both nodes;
#   6. many players' positions while the api container is stopped (podman stop: SIGTERM): every
#      position answered 204 is in PostgreSQL afterwards, and the node exited 0;
#   7. the spill volume: positions accepted while PostgreSQL is stopped, then a stop of the api,
#      leave a spill file in its volume, and the next start of the container replays them into
#      PostgreSQL before /readyz answers 200.
#
# Every wait is a bounded poll, every podman command has a time limit, and whatever the outcome
# the project's containers, volumes and network are removed. Ports on 127.0.0.1 from
# PLAYHEAD_TEST_IMAGE_BASE_PORT (27200) to base+3.
set -euo pipefail

cd "$(dirname "$0")/.."
cache=${PLAYHEAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/playhead}
# shellcheck source=scripts/podman.sh
. scripts/podman.sh
project=playhead-image-test
base=${PLAYHEAD_TEST_IMAGE_BASE_PORT:-27200}
export PLAYHEAD_HTTP_PORT=$base PLAYHEAD_API_METRICS_PORT=$((base + 1))
export PLAYHEAD_WORKER_METRICS_PORT=$((base + 2)) PLAYHEAD_PROMETHEUS_PORT=$((base + 3))
export PLAYHEAD_FLUSH_INTERVAL=30s PLAYHEAD_SHUTDOWN_TIMEOUT=8s
export PLAYHEAD_JWT_SECRET PLAYHEAD_DB_PASSWORD PLAYHEAD_S3_ACCESS_KEY_ID PLAYHEAD_S3_SECRET_ACCESS_KEY
PLAYHEAD_JWT_SECRET=$(head -c 32 /dev/urandom | base64)
PLAYHEAD_DB_PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
PLAYHEAD_S3_ACCESS_KEY_ID=test$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
PLAYHEAD_S3_SECRET_ACCESS_KEY=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
api_url=http://127.0.0.1:$PLAYHEAD_HTTP_PORT
players=200
rounds=8

# One run per machine: the project name and ports are fixed, and the start removes whatever the
# project has, so a second run would tear down a first one's containers mid-test.
mkdir -p "$cache"
exec 9>"$cache/test-image.lock"
flock -n 9 || { echo "test-image: FAIL: another make test-image runs on this machine ($cache/test-image.lock)" >&2; exit 1; }
work=$(mktemp -d)
started=$SECONDS
# fd 8: the script's own stderr, for messages from a check that wait_for runs with stderr on
# /dev/null (exited_ok's fail: without it a container's non-zero exit ended the run silently,
# finish's logs included).
exec 8>&2
say() { echo "test-image: $*" >&8; }
fail() {
  say "FAIL: $*"
  exit 1
}
ctr() { echo "${project}_$1_1"; }
compose() { timeout 300 podman-compose -p "$project" -f compose.yaml "$@" >>"$work/compose.log" 2>&1; }

# Removes every container (with its anonymous volumes), volume and network of the project, by
# podman-compose's project label: 1.0.3's `down -v` leaves the network, and the anonymous
# volumes of the containers it removes.
remove_project() {
  local label=label=io.podman.compose.project=$project ids
  # Every podman call bounded: a stuck podman lock must fail CI, not hang it.
  ids=$(timeout 60 podman ps -aq --filter "$label")
  # shellcheck disable=SC2086
  [ -z "$ids" ] || timeout 120 podman rm -f -v -t 0 $ids >/dev/null 2>&1 || true
  ids=$(timeout 60 podman volume ls -q --filter "$label")
  # shellcheck disable=SC2086
  [ -z "$ids" ] || timeout 60 podman volume rm -f $ids >/dev/null 2>&1 || true
  ids=$(timeout 60 podman network ls -q --filter "$label")
  # shellcheck disable=SC2086
  [ -z "$ids" ] || timeout 60 podman network rm -f $ids >/dev/null 2>&1 || true
}

finish() {
  local status=$?
  exec 1>&8 2>&8
  if [ "$status" -ne 0 ]; then
    say "the last lines of podman-compose's output, then of each container's log:"
    tail -n 20 "$work/compose.log" >&2 || true
    for name in $(timeout 60 podman ps -a --filter "label=io.podman.compose.project=$project" --format '{{.Names}}'); do
      echo "--- $name ($(timeout 10 podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$name" 2>/dev/null))" >&2
      timeout 10 podman logs --tail 30 "$name" >&2 2>&1 || true
    done
  fi
  remove_project
  rm -rf "$work"
  say "$([ "$status" -eq 0 ] && echo passed || echo failed) in $((SECONDS - started)) s"
  exit "$status"
}
trap finish EXIT
# So that a stop of make (Ctrl-C, a CI time-out) still cleans up.
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for WHAT SECONDS COMMAND...: COMMAND every 200 ms until it succeeds; fails after SECONDS.
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "$what: not within ${limit}s"
    sleep 0.2
  done
}

# state NAME: "status exit-code" (a poll of inspect: podman wait misreads a container that is
# already stopped).
state() { timeout 10 podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$1"; }
exited_ok() {
  local s
  s=$(state "$1")
  case $s in
    "exited 0" | "stopped 0") return 0 ;;
    exited* | stopped*) fail "$1 ended with: $s" ;;
  esac
  return 1
}
healthy() { timeout 10 podman healthcheck run "$1"; }

json() { /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

remove_project
podman_usable localhost/playhead:latest

# The published ports must be free: podman-compose 1.0.3 logs a failed `podman run` and exits 0,
# and the wait below would then time out on "no 200" (or talk to whatever holds the port).
for port in $PLAYHEAD_HTTP_PORT $PLAYHEAD_API_METRICS_PORT $PLAYHEAD_WORKER_METRICS_PORT $PLAYHEAD_PROMETHEUS_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is in use (PLAYHEAD_TEST_IMAGE_BASE_PORT picks other ports)"
  fi
done

# compose.yaml's stop grace of the nodes, as a duration in seconds, must exceed the default
# PLAYHEAD_SHUTDOWN_TIMEOUT it sets (podman-compose ignores stop_grace_period, so the stops
# below use it explicitly, as an operator following docs/operations/container.md would).
seconds() { /usr/bin/python3 -c 'import re, sys
m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", sys.argv[1])
sys.exit("not a duration: " + sys.argv[1]) if not m or not sys.argv[1] else print(int(m[1] or 0) * 60 + int(m[2] or 0))' "$1"; }
compose_value() { /usr/bin/python3 -c 'import sys, yaml
c = yaml.safe_load(open("compose.yaml"))
v = c["services"][sys.argv[1]]
for k in sys.argv[2:]: v = v[k]
print(v)' "$@"; }
grace=$(seconds "$(compose_value api stop_grace_period)")
drain_default=$(compose_value api environment PLAYHEAD_SHUTDOWN_TIMEOUT | sed -n 's/^.*:-\(.*\)}$/\1/p')
[ "$grace" -gt "$(seconds "$drain_default")" ] ||
  fail "compose.yaml: the api's stop_grace_period (${grace}s) is not longer than PLAYHEAD_SHUTDOWN_TIMEOUT's default ($drain_default)"
[ "$(seconds "$(compose_value worker stop_grace_period)")" -gt "$(seconds "$drain_default")" ] ||
  fail "compose.yaml: the worker's stop_grace_period is not longer than PLAYHEAD_SHUTDOWN_TIMEOUT's default ($drain_default)"

# The services in three steps, each waited on, since podman-compose 1.0.3 ignores the conditions
# of depends_on. It also starts the named services' dependencies: for one already running its
# `podman run` fails on the name (in compose.log) and it starts the existing container, a no-op.
say "starting postgres and seaweedfs"
compose up -d postgres seaweedfs
wait_for "postgres healthy" 90 healthy "$(ctr postgres)"
say "the one-shots: s3-bucket, migrate"
compose up -d --no-deps s3-bucket migrate
wait_for "s3-bucket exited 0" 90 exited_ok "$(ctr s3-bucket)"
wait_for "migrate exited 0" 90 exited_ok "$(ctr migrate)"

say "starting the api and worker nodes and prometheus"
# Start-up time: from the container's start (podman's StartedAt) to the first 200 of /readyz on
# its published metrics port, polled every 20 ms from before the start (podman-compose pauses
# 1 s after each container it starts, so its return is no measure).
first_ready() {
  local deadline=$((SECONDS + 120))
  until curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$PLAYHEAD_API_METRICS_PORT/readyz"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.02
  done
  date +%s%3N >"$work/api-ready"
}
first_ready &
poller=$!
compose up -d --no-deps api worker prometheus
wait "$poller" || fail "api /readyz: no 200 within 120 s"
started_ms=$(timeout 10 podman inspect -f '{{.State.StartedAt.UnixMilli}}' "$(ctr api)")
say "api: container start to /readyz 200 in $(($(cat "$work/api-ready") - started_ms)) ms"
wait_for "api healthy (its HEALTHCHECK)" 30 healthy "$(ctr api)"
wait_for "worker healthy (its HEALTHCHECK)" 90 healthy "$(ctr worker)"

for node in api worker; do
  name=$(ctr "$node")
  uid=$(timeout 10 podman exec "$name" id -u)
  [ "$uid" = 10001 ] || fail "$node runs as uid $uid, not the image's 10001"
  [ "$(timeout 10 podman inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$name")" = true ] ||
    fail "$node: root file system not read-only"
  # As root, whom only a read-only file system stops.
  if out=$(timeout 10 podman exec -u 0 "$name" sh -c 'echo x >/probe' 2>&1); then
    fail "$node: root's write to / succeeded"
  fi
  case $out in *"Read-only file system"*) ;; *) fail "$node: a write to / failed, but not as read-only: $out" ;; esac
  say "$node: uid $uid, read-only root file system (even root's write to / fails: read-only)"
  # Published on loopback only (compose.yaml's promise).
  ports=$(timeout 10 podman port "$name")
  [ -n "$ports" ] || fail "$node: no published port"
  if grep -v -- '-> 127\.0\.0\.1:' <<<"$ports" >&2; then fail "$node: a port published beyond 127.0.0.1"; fi
  # No capability in any set, and no way back to one (setuid binaries: su, mount, passwd).
  status=$(timeout 10 podman exec "$name" cat /proc/1/status)
  grep -Eq '^CapBnd:[[:space:]]+0+$' <<<"$status" || fail "$node: capabilities not all dropped: $(grep ^CapBnd <<<"$status")"
  grep -Eq '^NoNewPrivs:[[:space:]]+1$' <<<"$status" || fail "$node: no-new-privileges not set"
done

admin=$(timeout 10 podman exec "$(ctr api)" playhead token --member 1 --admin)
player=$(timeout 10 podman exec "$(ctr api)" playhead token --member 2)
# request TOKEN CURL-ARGS...: the body on stdout; fails unless the status is 2xx.
request() {
  local token=$1
  shift
  curl -fsS --max-time 30 -H "Authorization: Bearer $token" "$@"
}
# put_position TOKEN POSITION: the status of a player's report on $media (000: no answer).
put_position() {
  curl -s --max-time 30 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" -X PUT \
    -H 'Content-Type: application/json' -d "{\"position_ms\":$2}" "$api_url/v1/playback/$media" || true
}

media=$(request "$admin" -X POST "$api_url/v1/admin/media" -H 'Content-Type: application/json' \
  -d '{"title":"image test","duration_ms":3600000,"visibility":"PUBLIC","status":"READY","owner_id":1}' | json "['id']")
code=$(put_position "$player" 61000)
[ "$code" = 204 ] || fail "PUT of a position: $code"
position=$(request "$player" "$api_url/v1/playback/$media" | json "['position_ms']")
[ "$position" = 61000 ] || fail "position read back: $position, want 61000"
say "a position: PUT 204, read back $position"

ffmpeg -hide_banner -loglevel error -f lavfi -i testsrc=duration=2:size=320x240:rate=25 \
  -f lavfi -i sine=frequency=440:duration=2 -c:v libx264 -pix_fmt yuv420p -c:a aac -shortest \
  "$work/upload.mp4"
upload=$(request "$player" -X POST "$api_url/v1/media" -F "file=@$work/upload.mp4" -F title=upload | json "['id']")
deadline=$((SECONDS + 180))
while :; do
  status=$(request "$player" "$api_url/v1/media/$upload" | json ".get('status')")
  [ "$status" = READY ] && break
  [ "$status" != FAILED ] || fail "upload $upload FAILED: $(request "$player" "$api_url/v1/media/$upload")"
  [ $SECONDS -lt $deadline ] || fail "upload $upload: still $status after 180 s"
  sleep 0.5
done
say "an upload: media $upload READY"

# SeaweedFS answers only to its keys (compose.yaml's seaweedfs): its master, volume server and
# filer read, write, list and delete every object without credentials, so they must not be
# reachable from the other containers of the network (where anyone who took one of them would
# be). The ports it listens on are read from inside its container (/proc/net/tcp*), "port
# loopback|network" each: only S3's (8333) and S3's gRPC (18333, whose IAM and lifecycle calls
# SeaweedFS takes from local peers only) may be on the network, and the filer, master and volume
# ports must be among those on loopback, so that the refusals below are of ports in use.
sockets=$(timeout 10 podman exec "$(ctr seaweedfs)" cat /proc/net/tcp /proc/net/tcp6 | /usr/bin/python3 -c '
import ipaddress, sys
for line in sys.stdin:
    f = line.split()
    if len(f) < 4 or f[3] != "0A":  # 0A: LISTEN
        continue
    addr, port = f[1].rsplit(":", 1)
    # The kernel writes each 32-bit word of the address in host (little-endian) order.
    raw = b"".join(bytes.fromhex(addr[i:i + 8])[::-1] for i in range(0, len(addr), 8))
    ip = ipaddress.ip_address(raw)
    ip = getattr(ip, "ipv4_mapped", None) or ip
    print(int(port, 16), "loopback" if ip.is_loopback else "network")' | sort -u)
[ -n "$sockets" ] || fail "seaweedfs: no listening socket read from /proc/net/tcp*"
network_ports=$(awk '$2 == "network" { print $1 }' <<<"$sockets" | sort -un | paste -sd ' ')
loopback_ports=$(awk '$2 == "loopback" { print $1 }' <<<"$sockets" | sort -un | paste -sd ' ')
[ "$network_ports" = "8333 18333" ] ||
  fail "seaweedfs listens on the network on ports $network_ports, want S3's only (8333 18333): its master, volume server or filer is reachable without keys"
for port in 8888 9333 8080; do
  grep -qw "$port" <<<"$loopback_ports" || fail "seaweedfs: nothing on 127.0.0.1:$port (filer 8888, master 9333, volume 8080), so the check below would prove nothing: loopback ports are $loopback_ports"
done
# from_api SCRIPT ARGS...: bash SCRIPT in the api container, ARGS as its $1….
from_api() {
  local script=$1
  shift
  timeout 20 podman exec "$(ctr api)" bash -c "$script" _ "$@"
}
for port in $loopback_ports; do
  if out=$(from_api 'exec 3<>"/dev/tcp/seaweedfs/$1"' "$port" 2>&1); then
    fail "seaweedfs:$port accepts a connection from the api container"
  fi
  case $out in *"Connection refused"*) ;; *) fail "seaweedfs:$port from the api container: not refused but: $out" ;; esac
done
from_api 'exec 3<>/dev/tcp/seaweedfs/8333' || fail "seaweedfs:8333 (S3) does not accept a connection from the api container"
# A request without keys: its status line, sent from the api container (bash's /dev/tcp: the
# image has no HTTP client).
anonymous() {
  from_api 'exec 3<>/dev/tcp/seaweedfs/8333 &&
    printf "%s %s HTTP/1.1\r\nHost: seaweedfs:8333\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" "$1" "$2" >&3 &&
    IFS=" " read -r _ code _ <&3 && echo "$code"' "$1" "$2"
}
# signed CURL-ARGS... PATH: a request with the keys, from SeaweedFS's container (its curl, its
# environment's keys), through the network address the other containers use.
signed() {
  local path=${*: -1}
  timeout 20 podman exec "$(ctr seaweedfs)" bash -c \
    'curl -sS --max-time 10 --aws-sigv4 aws:amz:us-east-1:s3 --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "${@:1:$#-1}" "http://seaweedfs:8333${@: -1}"' \
    _ "${@:1:$#-1}" "$path"
}
object=$(signed '/playhead?list-type=2&max-keys=1' | grep -o '<Key>[^<]*' | head -n 1 | sed 's/^<Key>//')
[ -n "$object" ] || fail "S3 with the keys lists no object in the bucket after an upload"
for request in "GET /" "GET /playhead/" "GET /playhead/$object" "PUT /playhead/anonymous-probe" "DELETE /playhead/$object"; do
  # shellcheck disable=SC2086
  code=$(anonymous $request) || fail "S3 without keys, $request: no answer"
  [ "$code" = 403 ] || fail "S3 without keys, $request: $code, want 403"
done
code=$(signed -o /dev/null -w '%{http_code}' --head "/playhead/$object")
[ "$code" = 200 ] || fail "S3 with the keys, HEAD of $object after the requests without keys: $code, want 200"
say "seaweedfs: on the network only S3 ($network_ports); ports $loopback_ports on its loopback refuse the api container; S3 without keys 403 (list, read, write, delete), with them 200"

# Prometheus: both nodes' targets up (its first scrape comes within one 15 s interval of its
# start, which the position and upload above mostly cover).
scraped() {
  curl -fs --max-time 5 "http://127.0.0.1:$PLAYHEAD_PROMETHEUS_PORT/api/v1/targets" | /usr/bin/python3 -c '
import json, sys
health = {t["labels"]["instance"]: t["health"] for t in json.load(sys.stdin)["data"]["activeTargets"]}
sys.exit(0 if health == {"api:9464": "up", "worker:9464": "up"} else 1)'
}
wait_for "prometheus scraping both nodes" 60 scraped
say "prometheus: both nodes' targets up"

# metric NAME: its value on the api's metrics port.
metric() {
  curl -fs --max-time 5 "http://127.0.0.1:$PLAYHEAD_API_METRICS_PORT/metrics" | awk -v name="$1" '$1 == name { print $2 }'
}

# The stop: $players members each report $rounds increasing positions, a round at a time (one
# request per member, all in parallel; within the default rate limit's burst of 10). Once 3
# rounds are in, the api container gets podman stop (SIGTERM, 40 s before SIGKILL) while the
# rounds go on. The node flushes every 30 s here (PLAYHEAD_FLUSH_INTERVAL), so what it accepted
# is still in its buffer when SIGTERM comes, and only the stop can write it.
timeout 10 podman exec "$(ctr api)" playhead token --member 1000 --count "$players" >"$work/tokens"
writer() {
  local round member config
  for round in $(seq "$rounds"); do
    config=$work/round-$round.curl
    : >"$config"
    member=1000
    while read -r token; do
      # curl's config: `next` between the transfers (after the last one it would end the run
      # with "no URL specified" and abort those still in flight).
      [ "$member" = 1000 ] || echo next >>"$config"
      printf '%s\n' "url = \"$api_url/v1/playback/$media\"" 'request = "PUT"' \
        "header = \"Authorization: Bearer $token\"" 'header = "Content-Type: application/json"' \
        "data = \"{\\\"position_ms\\\": $((round * 1000))}\"" 'output = "/dev/null"' 'max-time = 20' \
        "write-out = \"%{http_code} $member $((round * 1000))\\n\"" >>"$config"
      member=$((member + 1))
    done <"$work/tokens"
    curl -s --parallel --parallel-max 50 -K "$config" >>"$work/answers" 2>/dev/null || true
    # Spread over a few seconds, so that the stop below lands among the rounds.
    sleep 0.3
  done
}
answered() { [ "$(wc -l <"$work/answers")" -ge "$1" ]; }
: >"$work/answers"
writer &
writer_pid=$!
wait_for "3 rounds of positions" 60 answered $((3 * players))
held=$(metric playhead_playback_buffer_held_keys)
say "stopping the api container (SIGTERM) after $(wc -l <"$work/answers") answers, $held keys held in its buffer"
[ "${held:-0}" -gt 0 ] || fail "nothing held in the buffer before the stop: the test would prove nothing"
stop_at=$SECONDS
timeout $((grace + 20)) podman stop -t "$grace" "$(ctr api)" >/dev/null
wait "$writer_pid"
wait_for "api exited 0" 60 exited_ok "$(ctr api)"
say "api stopped in $((SECONDS - stop_at)) s, exit code 0"

# Each member's last accepted position is what the table must hold (event time is the server's
# receive time, so a member's later report always wins).
awk '$1 == 204 { if ($3 > last[$2]) last[$2] = $3 } END { for (m in last) print m, last[m] }' \
  "$work/answers" | sort >"$work/accepted"
accepted=$(awk '$1 == 204' "$work/answers" | wc -l)
refused=$(awk '$1 != 204' "$work/answers" | wc -l)
timeout 30 podman exec "$(ctr postgres)" psql -U postgres -d playhead -tA -F ' ' -c \
  "SELECT member_id, position_ms FROM playback WHERE media_id = $media AND member_id >= 1000 ORDER BY 1" |
  sort >"$work/stored"
lost=$(join -a 1 "$work/accepted" "$work/stored" | awk 'NF < 3 || $3 < $2' | wc -l)
say "positions: $accepted answered 204 (the last of $(wc -l <"$work/accepted") members' in the table), $refused not accepted (the node was stopping: its port closed), lost: $lost"
[ "$accepted" -ge $((3 * players)) ] || fail "only $accepted positions accepted before the stop, want $((3 * players))"
[ "$lost" -eq 0 ] || fail "$lost members' accepted positions are not in PostgreSQL: $(join -a 1 "$work/accepted" "$work/stored" | awk 'NF < 3 || $3 < $2' | head -n 5 | tr '\n' ';')"

# The spill volume. The api starts again (its volume kept), takes one report with PostgreSQL up
# (so that its cache knows the media and keeps accepting reports for it without the database),
# then PostgreSQL stops; positions are accepted (held for retry), and the api's stop, unable to
# write them within PLAYHEAD_SHUTDOWN_TIMEOUT (8 s here), spills them to the volume.
api_ready() { curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$PLAYHEAD_API_METRICS_PORT/readyz"; }
# The cache keeps no entry loaded across its listener's first connection (which marks everything
# stale): the report waits for it.
listening() { [ "$(metric playhead_media_cache_clears_total)" -ge 1 ]; }
timeout 60 podman start "$(ctr api)" >/dev/null
wait_for "api ready again" 60 api_ready
wait_for "api's notification listener connected" 30 listening
code=$(put_position "$player" 62000)
[ "$code" = 204 ] || fail "PUT of a position after the restart: $code"
timeout 60 podman stop -t 30 "$(ctr postgres)" >/dev/null
spilled=0
while read -r token; do
  code=$(put_position "$token" 9000)
  [ "$code" = 204 ] || fail "PUT with PostgreSQL stopped: $code, want 204 (buffered for retry)"
  spilled=$((spilled + 1))
done < <(head -n 20 "$work/tokens")
# The HEALTHCHECK must fail when the node is not ready (here: /readyz 503, its database stopped),
# not only pass when it is.
! healthy "$(ctr api)" >/dev/null 2>&1 || fail "api's HEALTHCHECK passes with PostgreSQL stopped (/readyz 503)"
say "api's HEALTHCHECK fails while PostgreSQL is stopped"
timeout $((grace + 20)) podman stop -t "$grace" "$(ctr api)" >/dev/null
wait_for "api exited 0" 60 exited_ok "$(ctr api)"
volume=$(timeout 10 podman volume inspect -f '{{.Mountpoint}}' "${project}_api-spill")
files=$(find "$volume" -name 'playback-*.spill' | wc -l)
[ "$files" -ge 1 ] || fail "no spill file in the api's volume after a stop without PostgreSQL"
say "spill: $spilled positions accepted without PostgreSQL, $files spill file(s) in the api's volume after its stop"
timeout 60 podman start "$(ctr postgres)" >/dev/null
wait_for "postgres healthy again" 90 healthy "$(ctr postgres)"
# A new container (as after an image upgrade), not a restart of the old one: an anonymous
# volume would be gone with it; only compose.yaml's named volume carries the spill file over.
timeout 60 podman rm -f -t 0 "$(ctr api)" >/dev/null
compose up -d --no-deps api
wait_for "api ready after the replay" 60 api_ready
replayed=$(curl -fs --max-time 5 "http://127.0.0.1:$PLAYHEAD_API_METRICS_PORT/readyz" | json "['playback_buffer']['replayed_rows']")
stored=$(timeout 30 podman exec "$(ctr postgres)" psql -U postgres -d playhead -tA -c \
  "SELECT count(*) FROM playback WHERE media_id = $media AND member_id BETWEEN 1000 AND 1019 AND position_ms = 9000")
[ "$replayed" -ge "$spilled" ] || fail "the start replayed $replayed rows, want $spilled or more"
[ "$stored" -eq "$spilled" ] || fail "after the replay $stored of the $spilled spilled positions are in PostgreSQL"
[ "$(find "$volume" -name 'playback-*.spill' | wc -l)" -eq 0 ] || fail "spill file still in the volume after the replay"
say "spill: the next start replayed $replayed rows before /readyz 200; all $spilled positions in PostgreSQL"
