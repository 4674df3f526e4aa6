# shellcheck shell=bash
# Sourced by scripts/image.sh and scripts/test-image.sh: makes podman able to start containers
# here, once the base image exists.
#
# The caller sets cache (the tools cache, ~/.cache/playhead).
# shellcheck disable=SC2154
#
# podman_usable IMAGE: returns when `podman run IMAGE` works (any image with /bin/true). On a
# usual machine it does as installed. Some virtual machines (this project's CI among them) need
# two changes, made for this project's podman commands only, through CONTAINERS_CONF (a file in
# the tools cache, not the machine's /etc/containers), and only when the plain start fails:
#   - crun refuses a cgroup v1 host with a cgroup2 hierarchy mounted beside it ("cgroups in
#     hybrid mode not supported"): runc runs there;
#   - root without CAP_SYS_RESOURCE cannot raise the limits podman asks for by default (nofile
#     1048576): the containers get this machine's own hard limits instead, nproc at most 32768,
#     the limit conmon (podman's container monitor) was found to run with there.
podman_usable() {
  local image=$1 conf nofile nproc
  if timeout 120 podman run --rm --network none --entrypoint true "$image" >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v runc >/dev/null 2>&1; then
    install_packages runc
  fi
  conf=$cache/containers.conf
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
  mkdir -p "$cache"
  cat >"$conf" <<EOF
# Written by scripts/podman.sh: podman as installed could not start a container here.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF=$conf
  if ! timeout 120 podman run --rm --network none --entrypoint true "$image"; then
    echo "podman cannot start a container from $image, even with $conf" >&2
    exit 1
  fi
}

# install_packages PACKAGE...: apt-get install as root, or say what to install and fail.
install_packages() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "this needs: $*" >&2
    echo "install them, e.g.: sudo apt-get install -y $*" >&2
    exit 1
  fi
  echo "installing: $*" >&2
  export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
