#!/usr/bin/env bash
# The side-by-side benchmark: rlserver against Debian's redis-server, both on
# loopback, driven by redis-benchmark. Prints the table and writes it to
# bench/results/. Flags go to the harness (bench/harness): --quick for a
# smoke run with tiny counts, --runs N, --seconds S, --scripts-only for the
# library scripts (EVALSHA of each library's own Lua) alone, --cluster-compare
# for one node in cluster mode against standalone ones instead, --tail
# [--live-keys N] for latency percentiles, server CPU per request and GC
# pauses over N live keys instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	# Installed by hand, never started as a service: policy-rc.d stops the
	# package from starting one.
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
	apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
	rm -f /usr/sbin/policy-rc.d
fi
exec go run ./bench/harness "$@"
