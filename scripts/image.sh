#!/usr/bin/env bash
# make image: the container images of compose.yaml (docs/operations/container.md), built with
# podman from a Debian bookworm base made here by debootstrap, since this machine (and CI) reach
# Debian's mirror but no image registry.
#
#   localhost/playhead-base:bookworm    debootstrap --variant=minbase, trimmed like bookworm-slim
#   localhost/playhead-go:<go version>  the base with this machine's Go toolchain (GOROOT)
#   localhost/playhead:latest           Dockerfile: ./cmd/api on the base with ffmpeg
#   localhost/playhead-postgres:15, localhost/playhead-prometheus:2.42,
#   localhost/playhead-seaweedfs:latest container/*.Containerfile, Debian packages on the base
#                                       (SeaweedFS: the binary scripts/weed.sh builds)
#
# The base's root file system is cached as a tarball in ~/.cache/playhead (never in the
# checkout), and each of the first two images is skipped when it exists. With a registry,
# BASE=debian:bookworm-slim GO_IMAGE=golang:1.26-bookworm skips both and pulls those instead.
# Installs podman, debootstrap and podman-compose with apt-get when missing (as root), and where
# needed podman's dnsname plugin and runc (scripts/podman.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
cache=${PLAYHEAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/playhead}
suite=bookworm
local_base=localhost/playhead-base:$suite
BASE=${BASE:-$local_base}
GO=${GO:-go}
GO_IMAGE=${GO_IMAGE:-localhost/playhead-go:$("$GO" env GOVERSION | sed 's/^go//')}

log() { echo "image: $*" >&2; }
# shellcheck source=scripts/podman.sh
. scripts/podman.sh

# What make image and a compose up need: podman, podman-compose, debootstrap for a base of our
# own, and with podman's CNI network backend (Debian 12's when netavark is absent) its dnsname
# plugin, without which compose's services cannot find each other by name.
install_missing() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v podman-compose >/dev/null 2>&1 || missing+=(podman-compose)
  if [ "$BASE" = "$local_base" ]; then
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  fi
  [ ${#missing[@]} -eq 0 ] || install_packages "${missing[@]}"
  if [ "$(podman info --format '{{.Host.NetworkBackend}}')" = cni ] && [ ! -x /usr/lib/cni/dnsname ]; then
    install_packages golang-github-containernetworking-plugin-dnsname
  fi
}

# apt_uri SUITE: the first URI this machine's apt uses for SUITE (deb822 .sources files, then
# one-line .list files), so that debootstrap and the base's own apt reach the same mirror as
# apt-get here.
apt_uri() {
  local suite=$1 f uri=
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v RS= -v suite="$suite" '{
      n = split($0, line, "\n"); uris = ""; found = 0
      for (i = 1; i <= n; i++) {
        if (line[i] ~ /^URIs:/) { split(line[i], w, /[ \t]+/); uris = w[2] }
        if (line[i] ~ /^Suites:/) { m = split(line[i], s, /[ \t]+/); for (j = 2; j <= m; j++) if (s[j] == suite) found = 1 }
      }
      if (found && uris != "") { print uris; exit }
    }' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\)[[:space:]]\+'"$suite"'[[:space:]].*/\2/p' | head -n 1)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# debootstrap_rootfs TARBALL: a minbase bookworm with its updates and security updates applied,
# trimmed the way Debian's official bookworm-slim image is (no manuals, docs or translations,
# no recommends), packed as TARBALL.
debootstrap_rootfs() {
  local tarball=$1 mirror security root
  mirror=$(apt_uri "$suite")
  security=$(apt_uri "$suite-security")
  [ "$security" = "$mirror" ] && security=${mirror%/debian}/debian-security
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  # A root file system's / is 0755 (mktemp makes 0700, which apt's _apt user cannot enter).
  chmod 0755 "$root"
  # A failure halfway leaves neither a mounted /proc nor a half-made tree behind.
  trap 'umount "$root/proc" 2>/dev/null || true; rm -rf "$root" "$root.log"' EXIT
  log "debootstrap $suite from $mirror (security: $security) into $root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -n 20 "$root.log" >&2; exit 1; }

  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/dpkg/dpkg.cfg.d/01-slim" <<'EOF'
# As in Debian's bookworm-slim image: what a container never reads is not unpacked.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat >"$root/etc/apt/apt.conf.d/01-slim" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
EOF
  mount -t proc proc "$root/proc"
  chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -y -qq upgrade && apt-get clean' \
    >>"$root.log" 2>&1 || { tail -n 20 "$root.log" >&2; exit 1; }
  umount "$root/proc"
  rm -f "$root.log"
  # What the excludes above would have kept out, had they been there from the start; apt lists,
  # logs and the host's resolver and name are not the image's (podman provides its own).
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,groff,info,lintian,linda}/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  find "$root/var/log" -type f -delete
  rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
  : >"$root/etc/machine-id"

  tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
  trap - EXIT
}

base_image() {
  if [ "$BASE" != "$local_base" ]; then
    log "base $BASE (from its registry)"
    return 0
  fi
  if podman image exists "$BASE"; then
    log "base $BASE exists"
    return 0
  fi
  mkdir -p "$cache"
  local tarball=$cache/debian-$suite-minbase-rootfs.tar
  [ -f "$tarball" ] || debootstrap_rootfs "$tarball"
  log "importing $tarball as $BASE"
  podman import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' "$tarball" "$BASE" >/dev/null
}

# The build stage's Go: GO_IMAGE from its registry, or the base with this machine's toolchain.
go_image() {
  case $GO_IMAGE in
    localhost/playhead-go:*) ;;
    *) log "Go $GO_IMAGE (from its registry)"; return 0 ;;
  esac
  if podman image exists "$GO_IMAGE"; then
    log "Go $GO_IMAGE exists"
    return 0
  fi
  local goroot context
  goroot=$("$GO" env GOROOT)
  log "building $GO_IMAGE from $goroot"
  mkdir -p "$cache"
  context=$(mktemp -d "$cache/go-context.XXXXXX")
  trap 'rm -rf "$context"' EXIT
  # Hard links when the toolchain is on the same file system: 270 MB need not be copied twice.
  cp -al "$goroot" "$context/go" 2>/dev/null || cp -a "$goroot" "$context/go"
  mkdir "$context/ca"
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$context/ca/" \; 2>/dev/null || true
  podman build --quiet --build-arg BASE="$BASE" -t "$GO_IMAGE" -f container/go.Containerfile "$context" >/dev/null
  rm -rf "$context"
  trap - EXIT
}

# build TAG CONTAINERFILE CONTEXT [BUILD OPTION...]: podman's layer cache makes an unchanged
# image a few seconds. The docker format keeps HEALTHCHECK, which the OCI format has no field for.
build() {
  local tag=$1 file=$2 context=$3
  shift 3
  log "building $tag"
  podman build --quiet --format docker --build-arg BASE="$BASE" "$@" -t "$tag" -f "$file" "$context" >/dev/null
}

install_missing
base_image
podman_usable "$BASE"
go_image
build localhost/playhead:latest Dockerfile . --build-arg GO_IMAGE="$GO_IMAGE"
build localhost/playhead-postgres:15 container/postgres.Containerfile container
build localhost/playhead-prometheus:2.42 container/prometheus.Containerfile container
weed=$(GO="$GO" scripts/weed.sh)
build localhost/playhead-seaweedfs:latest container/seaweedfs.Containerfile "$(dirname "$weed")"
podman images --filter reference='localhost/playhead*' --format '{{.Repository}}:{{.Tag}}  {{.Size}}' >&2
