# failoverd's container image: the same binary for the daemon
# (`failoverd run`, the default) and the sidecar (`failoverd sidecar ...`).
#   make image    # = docker build --build-arg VERSION=$(cat VERSION) \
#                 #     --build-arg COMMIT=$(git rev-parse --short HEAD) \
#                 #     -t ghcr.io/failoverd/failoverd:$(cat VERSION) .
# The binary embeds the VERSION file; the build refuses a VERSION argument
# (the image's version label) that differs from it. The build command keeps
# the Makefile's flags (LDFLAGS); deploy/systemd's tests run it and check
# that it does.
#
# Both base images are pinned by the digest of their multi-platform index, so
# a rebuild of the same commit uses the same toolchain and runtime files.
# To move them, resolve each tag again and update tag and digest together:
#   crane digest golang:1.26.5
#   crane digest gcr.io/distroless/static-debian12:nonroot

FROM golang:1.26.5@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
ARG COMMIT=unknown
# The label must name the release the binary reports.
RUN test "${VERSION}" = "$(cat VERSION)" || { echo "build argument VERSION=${VERSION:-<unset>} differs from the VERSION file ($(cat VERSION)): use make image, or --build-arg VERSION=\$(cat VERSION)" >&2; exit 1; }
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.commit=${COMMIT}" -o /out/failoverd ./cmd/failoverd
# The default stateStore.path is /var/lib/failoverd/state.json: give nonroot
# a directory there (mount a volume on it to keep the state).
RUN mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
ARG VERSION
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="failoverd" \
      org.opencontainers.image.description="Keeps a MySQL/MariaDB failover group available and consistent; the daemon and its self-fencing sidecar" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/failoverd/failoverd" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/failoverd /failoverd
COPY --from=build --chown=65532:65532 /out/state /var/lib/failoverd
USER nonroot
# daemon.listen must be reachable from outside the container:
# listen: 0.0.0.0:8080 in the YAML, or FAILOVERD_DAEMON_LISTEN=0.0.0.0:8080.
EXPOSE 8080
ENTRYPOINT ["/failoverd"]
CMD ["run", "-c", "/etc/failoverd/failoverd.yaml"]
