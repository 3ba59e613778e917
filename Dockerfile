# rlserver: a rate-limiter server that speaks the Redis protocol.
#   docker build -t rlserver .
#   docker run -p 6380:6380 -p 9121:9121 -v rlserver-data:/data \
#     -e RLSERVER_PASSWORD=... rlserver --requirepass-file /run/secrets/rlpass
# The build line below is mirrored by cmd/rlserver's TestDockerfileBuild,
# which builds the binary the same way (no Docker engine runs in CI).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rlserver ./cmd/rlserver \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rlserver /usr/local/bin/rlserver
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME ["/data"]
# 6380: RESP. 9121: Prometheus /metrics and /healthz.
EXPOSE 6380 9121
# Listening beyond loopback needs a password (or --protected-mode=false on a
# trusted network): pass --requirepass-file with a mounted secret.
ENTRYPOINT ["/usr/local/bin/rlserver", "--addr", "0.0.0.0:6380", "--data-dir", "/data", "--metrics-addr", "0.0.0.0:9121"]
# The binary is its own health check: no shell or redis-cli in the image.
# (Add the password and TLS flags here if you use them.)
HEALTHCHECK --interval=10s --timeout=5s --retries=3 CMD ["/usr/local/bin/rlserver", "--ping", "127.0.0.1:6380"]
