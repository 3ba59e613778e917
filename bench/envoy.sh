#!/usr/bin/env bash
# The Envoy rate limit service side by side: rlserver --grpc-addr against
# envoyproxy/ratelimit 3fb7025 (built from the Go module proxy) with its
# Redis backend on a local redis-server, both serving bench/envoy.yaml,
# driven alternately by bench/grpcload (50 calls in flight, one connection,
# 1000 counters, 10 s per run, 3 runs each; its minimal HTTP/2 client, or
# grpc-go's with CLIENT=grpc). Each result line carries the generator's CPU
# per call (client_cpu_per_call) and ends with the server's (user + system
# from /proc, Redis included for envoyproxy/ratelimit). Scratch files go to
# $BENCH_DIR (default
# /tmp/rlserver-envoy-bench); nothing of envoyproxy/ratelimit is kept in
# this repository. GRPC_SERVERS lists the rlserver --grpc-server values to
# run, each its own rlserver in every round (default "fast"; "fast grpc-go"
# compares the two front ends in the same minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
B=${BENCH_DIR:-/tmp/rlserver-envoy-bench}
mkdir -p "$B/bin"
go build -o "$B/bin/rlserver" ./cmd/rlserver
go build -o "$B/bin/grpcload" ./bench/grpcload
if [ ! -x "$B/bin/service_cmd" ]; then
	GOBIN="$B/bin" go install github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36
fi
cd "$B"
rm -rf rt && mkdir -p rt/v1/ratelimit/config && cp "$repo/bench/envoy.yaml" rt/v1/ratelimit/config/ && ln -sfn v1 rt/current

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT
servers=(${GRPC_SERVERS:-fast})
rls=()
for i in "${!servers[@]}"; do
	bin/rlserver --addr 127.0.0.1:$((16391 + i)) --grpc-addr 127.0.0.1:$((18291 + i)) --envoy-config "$repo/bench/envoy.yaml" \
		--grpc-server "${servers[$i]}" --data-dir "" --log-level warn &
	rls+=($!); pids+=($!)
done
redis-server --port 16479 --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
red=$!; pids+=($red)
# envoyproxy/ratelimit exits if Redis does not answer at once.
for _ in $(seq 100); do redis-cli -p 16479 ping >/dev/null 2>&1 && break; sleep 0.1; done
env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:16479 \
	REDIS_POOL_SIZE=10 RUNTIME_ROOT="$B/rt/current" RUNTIME_SUBDIRECTORY=ratelimit HOST=127.0.0.1 PORT=18180 \
	GRPC_HOST=127.0.0.1 GRPC_PORT=18181 DEBUG_HOST=127.0.0.1 DEBUG_PORT=16170 bin/service_cmd 2>/dev/null &
erl=$!; pids+=($erl)
sleep 3
for p in "${pids[@]}"; do
	kill -0 "$p" 2>/dev/null || { echo "envoy.sh: a server (pid $p) exited at start; its ports may be in use" >&2; exit 1; }
done

# ticks: the CPU clock ticks (user + system) the given processes have used.
ticks() {
	local t=0 u s
	for p in "$@"; do
		read -r u s < <(cut -d' ' -f14,15 "/proc/$p/stat")
		t=$((t + u + s))
	done
	echo "$t"
}
hz=$(getconf CLK_TCK)
run() { # label addr pid...
	local label=$1 addr=$2 out c0 c1 calls
	shift 2
	c0=$(ticks "$@")
	# grpcload exits 1 when a call failed (its 1 s deadline, say), after
	# printing the figures, which count the failed call's wait.
	out=$(bin/grpcload -client "${CLIENT:-h2}" -addr "$addr" -c 50 -d 10s -label "$label" 2>&1) || true
	c1=$(ticks "$@")
	calls=$(sed -n 's/.* calls=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
	calls=${calls:-0}
	echo "$out" | tr '\n' ' '
	echo "cpu_per_call=$(( (c1 - c0) * 1000000 / hz / (calls > 0 ? calls : 1) ))us"
}
for r in 1 2 3; do
	echo "# run $r: $(uptime)"
	for i in "${!servers[@]}"; do
		label=rlserver
		[ "${#servers[@]}" -gt 1 ] && label=rlserver-${servers[$i]}
		run "$label" 127.0.0.1:$((18291 + i)) "${rls[$i]}"
	done
	run envoyproxy-ratelimit 127.0.0.1:18181 "$erl" "$red"
done
