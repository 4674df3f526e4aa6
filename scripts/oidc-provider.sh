#!/usr/bin/env bash
# Builds the OpenID Provider the identity tests sign in with (internal/oidctest): the example
# server of zitadel/oidc, an OpenID-certified Go library nobody on this project wrote, once per
# machine into ~/.cache/playhead/oidc-op-<version>/server (about a minute on 2 cores). Skipped
# when present. Prints the binary's path on success.
set -euo pipefail

GO=${GO:-go}
version=v3.52.0
cache=${PLAYHEAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/playhead}
dir="$cache/oidc-op-$version"
bin="$dir/server"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
echo "building zitadel/oidc $version's example OpenID Provider into $dir (once per machine)" >&2
GOBIN="$dir" GOFLAGS=-mod=mod "$GO" install "github.com/zitadel/oidc/v3/example/server@$version"
echo "$bin"
