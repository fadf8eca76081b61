# syntax=docker/dockerfile:1
#
# One image holding both binaries: the API (/usr/local/bin/api, the default command) and the cron
# client (/usr/local/bin/sweepcron), so that the API, its migration step and the bundled cron
# container always run the same build. Needs BuildKit (the cache mounts), the default builder of
# current Docker:
#
#   docker build -t sweeprail .
#   docker run --rm sweeprail sweepcron --help
#
# deploy/deploy_test.go runs every command line that deploy/ gives this image against the real
# binaries, so a renamed flag or subcommand fails `make test` rather than a deployment.

ARG GO_VERSION=1.26

# The builder runs on the build host's platform and cross-compiles (CGO is off), which is much
# faster than emulating the target under QEMU for a multi-platform build.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first: a change to the sources alone then reuses this layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS TARGETARCH
# Static (CGO_ENABLED=0: the runtime image has no libc), reproducible paths (-trimpath), no symbol
# table or DWARF (-s -w): the binaries stay small and the image holds nothing else to exploit.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/api ./cmd/sweepcron

# distroless/static: CA certificates, tzdata and a passwd entry for nonroot, and no shell, package
# manager or libc. Pin it by digest in production (gcr.io/distroless/static-debian12:nonroot@sha256:…).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/api /out/sweepcron /usr/local/bin/
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# Set explicitly so that a bare "sweepcron" or "api" resolves the same under every runtime.
ENV PATH=/usr/local/bin:/usr/bin:/bin
EXPOSE 8080
# No HEALTHCHECK: distroless has no shell, curl or wget to run one, and the API does not probe
# itself. Orchestrators probe GET /healthz (liveness) and GET /readyz (database, sweeprail's migrations, the policy's tables)
# over HTTP instead; compose orders start-up with depends_on (see deploy/compose.yaml).
# No ENTRYPOINT: with two binaries in the image, a command names the one it runs, e.g.
# `docker run sweeprail sweepcron --dry-run` or `api migrate up`.
CMD ["api", "serve"]
