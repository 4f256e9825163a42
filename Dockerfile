# Multi-stage build: a static stackd binary on a small non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/stackd ./cmd/stackd

# Alpine rather than distroless: the command provider runs /bin/sh, and
# go-git's file:// transport needs the git binary.
FROM alpine:3.20
RUN apk add --no-cache git ca-certificates \
 && adduser -D -u 10001 -h /var/lib/stackd stackd
COPY --from=build /out/stackd /usr/local/bin/stackd
USER 10001:10001
WORKDIR /var/lib/stackd
VOLUME ["/var/lib/stackd"]
EXPOSE 7070
ENTRYPOINT ["stackd"]
CMD ["run", "--listen", "0.0.0.0:7070", "--state-dir", "/var/lib/stackd/state", "--targets-root", "/var/lib/stackd/targets"]
