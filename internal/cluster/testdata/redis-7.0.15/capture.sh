#!/usr/bin/env bash
# Regenerates the captures in this directory from a real redis-server
# cluster: three masters on 127.0.0.1:17001-17003 (bus ports 27001-27003),
# the first two announcing hostnames, slots split as redis-cli would split
# them. Captures are taken on 17001 (which owns 0-5460; GET foo is MOVED).
# The node ids vary per run; topology.txt records them for the tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for port in 17001 17002 17003; do
	mkdir -p "$work/$port"
	extra=()
	if [ "$port" != 17003 ]; then extra=(--cluster-announce-hostname "node$port.example"); fi
	redis-server --port "$port" --bind 127.0.0.1 --dir "$work/$port" --save '' --appendonly no \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-preferred-endpoint-type ip \
		"${extra[@]}" >"$work/$port/log" 2>&1 &
	pids+=($!)
done
for port in 17001 17002 17003; do
	until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
done
redis-cli -p 17001 cluster addslotsrange 0 5460 >/dev/null
redis-cli -p 17002 cluster addslotsrange 5461 10922 >/dev/null
redis-cli -p 17003 cluster addslotsrange 10923 16383 >/dev/null
redis-cli -p 17001 cluster meet 127.0.0.1 17002 >/dev/null
redis-cli -p 17001 cluster meet 127.0.0.1 17003 >/dev/null
until [ "$(redis-cli -p 17001 cluster info | tr -d '\r' | grep cluster_state)" = cluster_state:ok ] &&
	[ "$(redis-cli -p 17003 cluster info | tr -d '\r' | grep cluster_known_nodes)" = cluster_known_nodes:3 ]; do
	sleep 0.2
done
sleep 1 # let hostnames propagate over the bus
: >"$here/topology.txt"
for port in 17001 17002 17003; do
	echo "$port $(redis-cli -p "$port" cluster myid)" >>"$here/topology.txt"
done
python3 "$here/capture.py" 17001 "$here"
redis-server --version | awk '{print $3}' >"$here/version.txt"
