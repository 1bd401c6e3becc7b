# failoverd's container image: the same binary for the daemon
# (`failoverd run`, the default) and the sidecar (`failoverd sidecar ...`).
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) -t failoverd .
# The build command keeps the Makefile's flags (LDFLAGS); deploy/systemd's
# tests run it and check that it does.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/failoverd ./cmd/failoverd
# The default stateStore.path is /var/lib/failoverd/state.json: give nonroot
# a directory there (mount a volume on it to keep the state).
RUN mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/failoverd /failoverd
COPY --from=build --chown=65532:65532 /out/state /var/lib/failoverd
USER nonroot
# daemon.listen must be reachable from outside the container:
# listen: 0.0.0.0:8080 in the YAML, or FAILOVERD_DAEMON_LISTEN=0.0.0.0:8080.
EXPOSE 8080
ENTRYPOINT ["/failoverd"]
CMD ["run", "-c", "/etc/failoverd/failoverd.yaml"]
