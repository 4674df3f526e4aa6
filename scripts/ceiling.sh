#!/usr/bin/env bash
# make ceiling: where the one PostgreSQL stops. Starts the cluster of scripts/cluster.sh (3 api
# nodes behind HAProxy, 2 workers, PgBouncer in transaction mode, one PostgreSQL with fsync on)
# under its own directory and ports, drives it through HAProxy with the Go load generator
# (players reporting every 5 s, a list read every 5 minutes), and prints the load generator's
# report: requests, the positions written a second, and the database server's CPU in all, per
# row written, in cores kept busy, and the players one of its cores serves at that rate of rows
# per player, for the whole run and again after the ramp (without the players' opening POSTs).
# Then stops the cluster. Loopback only; the run is bounded by its ramp and hold.
#
#   make ceiling                                    # 20 000 players, 30 s ramp, 60 s hold
#   CEILING_PLAYERS=40000 CEILING_HOLD=120s make ceiling
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

export PLAYHEAD_CLUSTER_DIR=${PLAYHEAD_CLUSTER_DIR:-$root/.data/ceiling}
export PLAYHEAD_CLUSTER_BASE_PORT=${PLAYHEAD_CLUSTER_BASE_PORT:-27200}
base=$PLAYHEAD_CLUSTER_BASE_PORT
players=${CEILING_PLAYERS:-20000}
ramp=${CEILING_RAMP:-30s}
hold=${CEILING_HOLD:-60s}
out=${CEILING_OUT:-$root/.data/ceiling-report}
mkdir -p "$out"

go build -o bin/loadgen ./cmd/loadgen
scripts/cluster.sh up >"$out/cluster-up.txt"
trap 'scripts/cluster.sh down >/dev/null' EXIT

# The ports of scripts/cluster.sh: HAProxy at base+2, PostgreSQL at base, api node i's metrics
# at base+20+i.
metrics=""
for i in 1 2 3; do metrics+="${metrics:+,}http://127.0.0.1:$((base + 20 + i))/metrics"; done
PLAYHEAD_JWT_SECRET=$(cat "$PLAYHEAD_CLUSTER_DIR/jwt-secret") bin/loadgen \
  --targets "http://127.0.0.1:$((base + 2))" --metrics "$metrics" \
  --database-url "postgres://postgres@127.0.0.1:$base/playhead?sslmode=disable" \
  --players "$players" --ramp "$ramp" --duration "$hold" \
  --label "ceiling: $players players through HAProxy to 3 api nodes" \
  --json "$out/ceiling-$players.json" | tee "$out/ceiling-$players.txt"
