#!/usr/bin/env bash
# Installs what Playhead needs to run and test: PostgreSQL server binaries, ffmpeg, prlimit, and
# Prometheus (prometheus and promtool, for the dashboard and alert check in grafana/),
# python3-openpyxl (the import's tests), wrk (the load of make bench-put), PgBouncer and HAProxy.
# As root it uses apt-get; otherwise it says exactly what to install and fails.
set -euo pipefail

missing=()
have_pg() { command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
have_pg || missing+=(postgresql)
command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg)
command -v ffprobe >/dev/null 2>&1 || missing+=(ffmpeg)
# prlimit applies the encoder's memory limit (PLAYHEAD_ENCODE_MEMORY_LIMIT) before ffmpeg starts.
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
# The player page: npm installs hls.js and playwright-core (package-lock.json); its browser test
# drives Debian's Chromium at /usr/bin/chromium.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
# Korean text (the import page's sheets) in the browser tests' screenshots.
[ -d /usr/share/fonts/truetype/nanum ] || missing+=(fonts-nanum)
# The import's tests write sheets with openpyxl, a library other than the one the import reads
# with; it is imported by Debian's interpreter, /usr/bin/python3.
/usr/bin/python3 -c 'import openpyxl' >/dev/null 2>&1 || missing+=(python3-openpyxl)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# wrk drives the PUT-path benchmark (make bench-put).
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# PgBouncer and HAProxy: make test-pgbouncer and make cluster (docs/operations/clusters.md).
command -v pgbouncer >/dev/null 2>&1 || missing+=(pgbouncer)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Playhead needs: $pkgs" >&2
  echo "install them, e.g.: sudo apt-get install -y $pkgs" >&2
  exit 1
fi
echo "installing: $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
