#!/usr/bin/env bash
# Builds SeaweedFS's `weed` binary, the real S3 server the storage tests run against
# (internal/s3test), once per machine into ~/.cache/playhead/weed-<version>/weed. Skipped when
# present. `go install …/weed@version` refuses the module (its go.mod has replace directives), so
# the module is downloaded, copied out of the read-only module cache and built in place: about 6
# minutes on 2 cores, a 230 MB binary, kept out of the checkout.
# Prints the binary's path on success.
set -euo pipefail

GO=${GO:-go}
module=github.com/seaweedfs/seaweedfs
version=v0.0.0-20261109003541-7506e5f91cd6
cache=${PLAYHEAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/playhead}
dir="$cache/weed-$version"
bin="$dir/weed"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
# One build at a time per machine: parallel `make deps` (other checkouts) wait for the first.
exec 9>"$dir.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
echo "building SeaweedFS $version into $dir (about 6 minutes, once per machine)" >&2
src=$("$GO" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "go mod download $module@$version gave no directory" >&2
  exit 1
fi
work=$(mktemp -d "$dir/src.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
(cd "$work" && GOFLAGS=-mod=mod "$GO" build -o "$bin.tmp" ./weed)
mv "$bin.tmp" "$bin"
echo "$bin"
