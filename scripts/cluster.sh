#!/usr/bin/env bash
# make cluster / make cluster-down: the multi-node topology on one machine, every process on
# 127.0.0.1 (docs/operations/clusters.md, "A local cluster"):
#
#   HAProxy :base+2 ──► 3 api nodes (PLAYHEAD_ROLE=api), health-checked on /readyz
#   2 worker nodes (PLAYHEAD_ROLE=worker)
#   every node ──► PgBouncer :base+1 (pool_mode = transaction) ──► PostgreSQL :base
#              └─► PostgreSQL directly for what needs a session (PLAYHEAD_DATABASE_DIRECT_URL)
#
# scripts/cluster.sh up    starts it (apt-get installs haproxy and pgbouncer when missing, as
#                          root) and prints the URLs and both connection strings;
# scripts/cluster.sh down  stops it: nodes with SIGTERM (graceful), then HAProxy, PgBouncer and
#                          PostgreSQL, and deletes the data; the logs stay.
#
# Everything lives under PLAYHEAD_CLUSTER_DIR (default .data/cluster, gitignored): pids,
# logs, the database, the object store. Ports from PLAYHEAD_CLUSTER_BASE_PORT (default 27100)
# up to base+31. Uses bin/playhead (make build).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${PLAYHEAD_CLUSTER_DIR:-$root/.data/cluster}
base=${PLAYHEAD_CLUSTER_BASE_PORT:-27100}
bin=$root/bin/playhead

pg_port=$base
bouncer_port=$((base + 1))
lb_port=$((base + 2))
stats_port=$((base + 3))
api_nodes=3
worker_nodes=2
api_http() { echo $((base + 10 + $1)); }
api_metrics() { echo $((base + 20 + $1)); }
worker_metrics() { echo $((base + 30 + $1)); }

# The balancer checks /readyz every 500 ms and takes a node out after 2 failures (about 1.5 s
# with the first interval); a stopping node keeps serving for twice that before its port
# closes (PLAYHEAD_SHUTDOWN_DRAIN_DELAY), so the balancer stops sending first.
drain_delay=3s

direct_url="postgres://postgres@127.0.0.1:$pg_port/playhead?sslmode=disable"
pooled_url="postgres://postgres@127.0.0.1:$bouncer_port/playhead?sslmode=disable"

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# wait_for DESCRIPTION SECONDS COMMAND...: runs COMMAND every 200 ms until it succeeds, or fails
# the script after SECONDS.
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "cluster: $what not up after ${limit}s (logs in $dir/logs)" >&2
      return 1
    fi
    sleep 0.2
  done
}

install_missing() {
  local missing=()
  command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
  command -v pgbouncer >/dev/null 2>&1 || missing+=(pgbouncer)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "cluster needs: ${missing[*]} (e.g. sudo apt-get install -y ${missing[*]})" >&2
    return 1
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

pg_bindir() {
  dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -n 1)")"
}

start_postgres() {
  local bindir
  bindir=$(pg_bindir)
  mkdir -p "$dir/pg"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/pg"; fi
  as_pg "$bindir/initdb" -D "$dir/pg/data" -U postgres --auth=trust -E UTF8 >/dev/null
  # PostgreSQL's default durability (fsync on): the cluster is for measuring.
  # PLAYHEAD_CLUSTER_PG_OPTIONS adds server settings ("-c fsync=off", to compare).
  as_pg "$bindir/pg_ctl" -D "$dir/pg/data" -l "$dir/logs/postgres.log" -w -t 60 \
    -o "-p $pg_port -k $dir/pg -c listen_addresses=127.0.0.1 -c max_connections=200 ${PLAYHEAD_CLUSTER_PG_OPTIONS:-}" start >/dev/null
  as_pg "$bindir/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres playhead
}

start_pgbouncer() {
  mkdir -p "$dir/pgbouncer"
  echo '"postgres" ""' >"$dir/pgbouncer/users.txt"
  cat >"$dir/pgbouncer/pgbouncer.ini" <<EOF
[databases]
playhead = host=127.0.0.1 port=$pg_port dbname=playhead

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/pgbouncer/users.txt
pool_mode = transaction
; every node's request and flush pools (api: 10 + 2, worker: 12 + 2) share these server
; connections; PostgreSQL's 200 leave room for the direct ones
default_pool_size = 40
max_client_conn = 500
logfile = $dir/logs/pgbouncer.log
pidfile = $dir/pgbouncer/pgbouncer.pid
EOF
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$dir/pgbouncer"; fi
  # PgBouncer refuses to run as root.
  as_pg pgbouncer -d -q "$dir/pgbouncer/pgbouncer.ini"
  wait_for "PgBouncer" 20 as_pg "$(pg_bindir)/psql" "$pooled_url" -tAc 'SELECT 1'
}

# start_node NAME ROLE METRICS_PORT [HTTP_PORT]: one playhead serve in its own session,
# detached from this script, its pid in $dir/pids/NAME.pid.
start_node() {
  local name=$1 role=$2 metrics=$3 http=${4:-}
  mkdir -p "$dir/nodes/$name"
  env DATABASE_URL="$pooled_url" PLAYHEAD_DATABASE_DIRECT_URL="$direct_url" PLAYHEAD_DB_POOLER=transaction \
    PLAYHEAD_ROLE="$role" PLAYHEAD_NODE_ID="$name" PLAYHEAD_JWT_SECRET="$secret" \
    PLAYHEAD_HTTP_ADDR="127.0.0.1:${http:-0}" PLAYHEAD_METRICS_ADDR="127.0.0.1:$metrics" \
    PLAYHEAD_STORAGE_DIR="$dir/objects" PLAYHEAD_SPILL_DIR="$dir/nodes/$name/spill" \
    PLAYHEAD_SHUTDOWN_DRAIN_DELAY="$drain_delay" \
    setsid "$bin" serve </dev/null >>"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name.pid"
}

start_haproxy() {
  mkdir -p "$dir/haproxy"
  local servers=""
  for i in $(seq 1 $api_nodes); do
    servers+="  server api$i 127.0.0.1:$(api_http "$i") check port $(api_metrics "$i")"$'\n'
  done
  FRONT="127.0.0.1:$lb_port" STATS="127.0.0.1:$stats_port" SERVERS="$servers" \
    awk '{ gsub(/@FRONT@/, ENVIRON["FRONT"]); gsub(/@STATS@/, ENVIRON["STATS"]); sub(/@SERVERS@/, ENVIRON["SERVERS"]); print }' \
    "$root/scripts/haproxy.cfg" >"$dir/haproxy/haproxy.cfg"
  haproxy -c -q -f "$dir/haproxy/haproxy.cfg"
  # -D closes stderr: abnormal requests are not logged when HAProxy runs as a daemon.
  haproxy -D -f "$dir/haproxy/haproxy.cfg" -p "$dir/pids/haproxy.pid" 2>>"$dir/logs/haproxy.log"
}

up() {
  if [ -d "$dir/pids" ]; then
    echo "cluster: already running under $dir (scripts/cluster.sh down first)" >&2
    exit 1
  fi
  [ -x "$bin" ] || { echo "cluster: $bin missing: run make build" >&2; exit 1; }
  install_missing
  mkdir -p "$dir/logs" "$dir/pids" "$dir/objects"
  # PostgreSQL and PgBouncer run as postgres and write their logs here too.
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/logs"; fi
  trap 'echo "cluster: start-up failed; logs in $dir/logs; scripts/cluster.sh down cleans up" >&2' ERR
  secret=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
  echo "$secret" >"$dir/jwt-secret"
  chmod 600 "$dir/jwt-secret"

  start_postgres
  start_pgbouncer
  # The schema through the direct URL: goose's lock is a session advisory lock.
  DATABASE_URL="$direct_url" "$bin" migrate >>"$dir/logs/migrate.log"
  for i in $(seq 1 $api_nodes); do start_node "api$i" api "$(api_metrics "$i")" "$(api_http "$i")"; done
  for i in $(seq 1 $worker_nodes); do start_node "worker$i" worker "$(worker_metrics "$i")"; done
  for i in $(seq 1 $api_nodes); do wait_for "api$i" 60 curl -fsS "http://127.0.0.1:$(api_metrics "$i")/readyz"; done
  for i in $(seq 1 $worker_nodes); do wait_for "worker$i" 60 curl -fsS "http://127.0.0.1:$(worker_metrics "$i")/readyz"; done
  start_haproxy
  wait_for "HAProxy" 20 curl -fsS "http://127.0.0.1:$lb_port/readyz"

  token=$(PLAYHEAD_JWT_SECRET="$secret" "$bin" token --member 1 --admin --ttl 720h)
  cat <<EOT
cluster up (pids, logs and data under $dir)

  API through HAProxy:   http://127.0.0.1:$lb_port   (player: http://127.0.0.1:$lb_port/#token=$token)
  HAProxy stats:         http://127.0.0.1:$stats_port/stats
EOT
  for i in $(seq 1 $api_nodes); do
    echo "  api$i:                  http://127.0.0.1:$(api_http "$i")   metrics http://127.0.0.1:$(api_metrics "$i")/metrics"
  done
  for i in $(seq 1 $worker_nodes); do
    echo "  worker$i:               metrics http://127.0.0.1:$(worker_metrics "$i")/metrics"
  done
  cat <<EOT

  DATABASE_URL (PgBouncer, transaction mode): $pooled_url
  PLAYHEAD_DATABASE_DIRECT_URL (PostgreSQL):  $direct_url
  PLAYHEAD_JWT_SECRET:                        in $dir/jwt-secret

  admin token (member 1, 30 days): $token

stop it: make cluster-down (or scripts/cluster.sh down)
EOT
}

# stop_pid NAME SECONDS: SIGTERM the process of $dir/pids/NAME.pid, SIGKILL it if it is still
# there after SECONDS.
stop_pid() {
  local file=$dir/pids/$1.pid limit=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -TERM "$pid" 2>/dev/null; then
    local deadline=$((SECONDS + limit))
    while kill -0 "$pid" 2>/dev/null; do
      if [ $SECONDS -ge $deadline ]; then
        echo "cluster: $1 (pid $pid) still running after ${limit}s: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.2
    done
  fi
  rm -f "$file"
}

down() {
  if [ ! -d "$dir" ]; then
    echo "cluster: nothing under $dir" >&2
    return 0
  fi
  # The nodes first, in parallel, each within its shutdown budget (30 s) and some slack; then
  # what they used.
  local names=()
  for i in $(seq 1 $api_nodes); do names+=("api$i"); done
  for i in $(seq 1 $worker_nodes); do names+=("worker$i"); done
  for name in "${names[@]}"; do stop_pid "$name" 45 & done
  wait
  stop_pid haproxy 10
  if [ -f "$dir/pgbouncer/pgbouncer.pid" ]; then
    cp "$dir/pgbouncer/pgbouncer.pid" "$dir/pids/pgbouncer.pid"
    stop_pid pgbouncer 10
  fi
  if [ -f "$dir/pg/data/postmaster.pid" ]; then
    as_pg "$(pg_bindir)/pg_ctl" -D "$dir/pg/data" -m fast -w -t 60 stop >/dev/null || true
  fi
  rm -rf "$dir/pg" "$dir/pgbouncer" "$dir/haproxy" "$dir/objects" "$dir/nodes" "$dir/pids" "$dir/jwt-secret"
  echo "cluster down (logs kept in $dir/logs)"
}

case ${1:-up} in
up) up ;;
down) down ;;
*)
  echo "usage: scripts/cluster.sh [up|down]" >&2
  exit 2
  ;;
esac
