#!/bin/sh
# Runs Redis 7.0's own Tcl test units against a running rlserver:
#
#   testdata/redis-tcl/run.sh /path/to/redis-7.0.x 127.0.0.1 6379 [unit ...]
#
# The redis tree is copied to a temporary directory and its harness adapted
# in three ways, none of which changes what a test asserts:
#   - the external-server setup's FUNCTION FLUSH and CONFIG SET are allowed
#     to fail (rlserver has neither);
#   - outside a test (a unit's setup code), a command rlserver lacks
#     answers "" instead of aborting the whole unit; inside a test its
#     error fails that test;
#   - after a failed test the shared client leaves raw mode and any MULTI
#     the test left open (and RESP3, for a test named so), so the tests
#     after it do not fail with it.
# It runs with --singledb, --durable (a failing test does not stop its unit)
# and --ignore-encoding (rlserver has one encoding per type). The summary
# counts each unit's passed and failed tests; docs/compatibility.md gives
# the results and why each failure fails.
set -eu
src=$1 host=$2 port=$3
shift 3
units=${*:-unit/type/incr unit/type/string unit/type/hash unit/type/list unit/type/zset unit/expire unit/multi unit/keyspace unit/scan}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/runtest" "$src/tests" "$work/"
mkdir -p "$work/src"
ln -s "$(command -v redis-cli)" "$work/src/redis-cli"
ln -s "$(command -v redis-server)" "$work/src/redis-server"
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
def edit(path, old, new):
    p = f"{work}/{path}"
    s = open(p).read()
    assert old in s, (path, old)
    open(p, "w").write(s.replace(old, new, 1))
edit("tests/support/server.tcl", "    r function flush\n", "    catch {r function flush}\n")
edit("tests/support/server.tcl",
     "        dict set saved_config $param [lindex [r config get $param] 1]\n        r config set $param $val",
     "        catch {dict set saved_config $param [lindex [r config get $param] 1]}\n        catch {r config set $param $val}")
edit("tests/support/test.tcl",
     "    if {[catch {set retval [uplevel 1 $code]} error]} {",
     "    set ::rl_in_test 1\n    set failed [catch {set retval [uplevel 1 $code]} error]\n"
     "    set ::rl_in_test 0\n    if {$failed} { catch {r readraw 0}; catch {r discard}; if {[string match -nocase *resp3* $name]} { catch {r hello 2} } }\n    if {$failed} {")
edit("tests/test_helper.tcl",
     '    [srv $level "client"] {*}$args\n}',
     '    if {![info exists ::rl_in_test] || !$::rl_in_test} {\n'
     '        if {[catch {set res [[srv $level "client"] {*}$args]} err]} { return "" }\n'
     '        return $res\n    }\n    [srv $level "client"] {*}$args\n}')
# unit/scripting runs each test twice, first through FUNCTION (which
# rlserver deliberately lacks: docs/compatibility.md), then through EVAL:
# keep the EVAL round only.
edit("tests/unit/scripting.tcl", "foreach is_eval {0 1} {", "foreach is_eval {1} {")
PY
cd "$work"
for u in $units; do
	log="$work/$(echo "$u" | tr / _).log"
	./runtest --host "$host" --port "$port" --singledb --durable --ignore-encoding --single "$u" --clients 1 --timeout 120 >"$log" 2>&1 || true
	sed 's/\x1b\[[0-9;]*m//g' "$log" >"$log.txt"
	printf '%-20s passed %4d  failed %4d\n' "$u" "$(grep -c '^\[ok\]' "$log.txt")" "$(grep -c '^\[err\]' "$log.txt")"
	if [ -n "${KEEP_LOGS:-}" ]; then cp "$log.txt" "$KEEP_LOGS/"; fi
done
