# The playhead image: the one binary (serve --role=all|api|worker, migrate, token) on Debian
# bookworm with ffmpeg (docs/operations/container.md).
#
# make image builds it with podman from images made on this machine (scripts/image.sh). With a
# registry, the ordinary way, after `make web` (see below):
#
#   podman build --format docker --build-arg BASE=debian:bookworm-slim \
#     --build-arg GO_IMAGE=golang:1.26-bookworm -t playhead .
#   docker build --build-arg BASE=debian:bookworm-slim --build-arg GO_IMAGE=golang:1.26-bookworm -t playhead .
#
# `--format docker` because the OCI image format has no HEALTHCHECK: podman drops it otherwise.
#
# The pages' scripts from npm (hls.js, tus-js-client, Chart.js: web/static/vendor/, not committed)
# are embedded in the binary. `make web` puts them there on the host before the build, from
# package-lock.json, and they come in with the source: the image needs no Node.js and no npm.
ARG BASE=localhost/playhead-base:bookworm
ARG GO_IMAGE=localhost/playhead-go:1.26.8

FROM ${GO_IMAGE} AS build
# The same paths in the official golang image and in scripts/image.sh's: the cache mounts
# below keep modules and compiled packages between builds (an edit recompiles only what it
# touched), outside every image layer.
ENV GOPATH=/go GOCACHE=/go/build-cache GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN test -s web/static/vendor/hls.min.js && test -s web/static/vendor/tus.min.js && test -s web/static/vendor/chart.min.js || \
    { echo "web/static/vendor/ is empty: run make web before building the image" >&2; exit 1; }
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/go/build-cache \
    go build -trimpath -ldflags='-s -w' -o /out/playhead ./cmd/api

FROM ${BASE}
ARG DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
# ffmpeg and ffprobe encode; ca-certificates for HTTPS to S3, webhook receivers and imports;
# prlimit (util-linux, in every Debian base) applies PLAYHEAD_ENCODE_MEMORY_LIMIT.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid, so that volumes and a Kubernetes runAsUser can name it. The spill directory must
# be the process's own and not group- or world-writable (PLAYHEAD_SPILL_DIR), hence 0750; a
# volume mounted on an empty directory of the image takes its owner and mode.
RUN useradd --uid 10001 --user-group --home-dir /var/lib/playhead --no-create-home \
      --shell /usr/sbin/nologin playhead \
 && install -d -o playhead -g playhead -m 0750 /var/lib/playhead /var/lib/playhead/spill \
      /var/lib/playhead/objects
COPY --from=build /out/playhead /usr/local/bin/playhead

# Runs with a read-only root file system; what the process writes:
#   - the spill files, in a volume: they must outlive the container (the next start replays
#     them before /readyz answers 200);
#   - with PLAYHEAD_STORAGE=local (the default), the object store: mount a volume (one that
#     every node shares) on /var/lib/playhead/objects, or use S3;
#   - scratch files of encodes and imports (the source, ffmpeg's outputs before their upload,
#     downloads, an uploaded sheet), in TMPDIR: podman run --read-only mounts a tmpfs on /tmp,
#     docker needs --tmpfs /tmp; a worker encoding long videos wants a volume there instead
#     (they are as large as the videos), as compose.yaml's has.
ENV PLAYHEAD_HTTP_ADDR=:8080 \
    PLAYHEAD_METRICS_ADDR=:9464 \
    PLAYHEAD_SPILL_DIR=/var/lib/playhead/spill \
    PLAYHEAD_STORAGE_DIR=/var/lib/playhead/objects \
    TMPDIR=/tmp
VOLUME ["/var/lib/playhead/spill"]
WORKDIR /var/lib/playhead
USER 10001:10001
EXPOSE 8080 9464

# SIGTERM starts the graceful stop (PLAYHEAD_SHUTDOWN_TIMEOUT, 30 s by default): give the
# container longer than that to stop (docker stop -t 40, podman stop -t 40,
# stop_grace_period: 40s) or the positions still buffered are killed with it.
STOPSIGNAL SIGTERM
# /readyz on the metrics port: 200 once every part of the node has started (spill replayed,
# workers running), 503 from the first moment of a stop. Bash's /dev/tcp, so that no HTTP client
# is installed for it; the port is PLAYHEAD_METRICS_ADDR's.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PLAYHEAD_METRICS_ADDR##*:} && printf 'GET /readyz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && read -r _ code _ <&3 && [ \"$code\" = 200 ]"]
ENTRYPOINT ["/usr/local/bin/playhead"]
CMD ["serve"]
