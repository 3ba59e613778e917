# rlserver: a rate-limiter server that speaks the Redis protocol.
#
#   docker build -t rlserver .
#   printf %s 'choose-a-password' > rlpass && chmod 644 rlpass
#   docker run -d --name rlserver -p 6380:6380 -p 9121:9121 -v rlserver-data:/data \
#     -v "$PWD/rlpass:/run/secrets/rlpass:ro" -e RLSERVER_REQUIREPASS_FILE=/run/secrets/rlpass \
#     --stop-timeout 10 rlserver
#
# (Or -e RLSERVER_REQUIREPASS=... without a file; `docker inspect` shows it.)
# compose.yaml runs the same with a compose secret, and Prometheus beside it.
#
# Configure the server with RLSERVER_* variables (every flag has one:
# --data-dir is RLSERVER_DATA_DIR) rather than with flags after the image
# name: the HEALTHCHECK below runs with the container's environment, so its
# `rlserver --ping` authenticates with the same password (and TLS files) as
# the server, while flags reach the server alone.
#
# `docker stop` sends SIGTERM and, after --stop-timeout (10 s by default),
# SIGKILL. rlserver's --shutdown-timeout (8 s) covers draining connections
# and the final snapshot together; raise both together, keeping the stop
# timeout the larger.
#
# cmd/rlserver's container tests run the binary with this file's ENV,
# ENTRYPOINT and HEALTHCHECK, with the `docker run` above and with
# compose.yaml (no Docker engine runs in CI); TestDockerfileBuild builds it
# with the build line below.

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
# 6380: RESP. 9121: Prometheus /metrics and /healthz. Listening beyond
# loopback needs a password (protected mode), or --protected-mode=false
# (RLSERVER_PROTECTED_MODE=false) on a trusted network.
EXPOSE 6380 9121
ENV RLSERVER_ADDR=0.0.0.0:6380 RLSERVER_DATA_DIR=/data RLSERVER_METRICS_ADDR=0.0.0.0:9121
ENTRYPOINT ["/usr/local/bin/rlserver"]
# The binary is its own health check: no shell or redis-cli in the image.
HEALTHCHECK --interval=10s --timeout=5s --retries=3 CMD ["/usr/local/bin/rlserver", "--ping", "127.0.0.1:6380"]
