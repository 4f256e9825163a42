# Multi-stage build: a static stackd binary on a small non-root image.
#
#   docker build -t stackd .
#   docker run -d -p 7070:7070 -v stackd:/var/lib/stackd \
#     -v /etc/stackd/api-token:/run/secrets/api-token:ro \
#     stackd run --repo https://git.example.com/platform/stacks.git \
#       --api-token-file /run/secrets/api-token
#
# Without --repo (or STACKD_REPO) and a token the default command stops at
# once and says which is missing.
# Base images are pinned by digest (multi-arch index digests): a rebuild gets
# the same bytes. To move to a newer patch release, look the digest up with
# `docker buildx imagetools inspect golang:1.26.N` (or alpine:3.23.N) and
# change tag and digest together.
FROM golang:1.26.5@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# -buildvcs: stackd version names the commit (needs the .git directory in
# the build context; without it the version is "(devel)").
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=auto -ldflags="-s -w" -o /out/stackd ./cmd/stackd

# Alpine rather than distroless: the command provider runs /bin/sh, and
# go-git's file:// transport needs the git binary. tini is PID 1: it reaps
# the children command resources leave and forwards SIGTERM to stackd.
# Alpine 3.23 is supported until 2027-11.
FROM alpine:3.23.5@sha256:fd791d74b68913cbb027c6546007b3f0d3bc45125f797758156952bc2d6daf40
RUN apk add --no-cache git ca-certificates tini \
 && adduser -D -u 10001 -h /var/lib/stackd stackd
COPY --from=build /out/stackd /usr/local/bin/stackd
USER 10001:10001
WORKDIR /var/lib/stackd
VOLUME ["/var/lib/stackd"]
EXPOSE 7070
# /healthz needs no token; busybox wget is in the image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:7070/healthz || exit 1
ENTRYPOINT ["/sbin/tini", "--", "stackd"]
CMD ["run", "--listen", "0.0.0.0:7070", "--state-dir", "/var/lib/stackd/state", "--targets-root", "/var/lib/stackd/targets"]
