"""Runs the client patterns of docs/compatibility.md against rlserver with
redis-py (Debian's python3-redis). The server is at $RLSERVER_ADDR, started
by internal/resp/clients_test.go with a frozen clock and a rule "five"
(fixed_window, 5 per minute). Exits non-zero, listing what failed."""
import os
import sys

import redis

host, port = os.environ["RLSERVER_ADDR"].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port), decode_responses=True)
failures = []


def check(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")


def expect_error(name, fn, text):
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        if text not in str(e):
            failures.append(f"{name}: error {e!r} lacks {text!r}")
        return
    failures.append(f"{name}: no error")


# The Redis docs' INCR rate limiter, in a transaction.
for want in ([1, True], [2, True]):
    p = r.pipeline(transaction=True)
    p.incr("ip:1")
    p.expire("ip:1", 10)
    check("MULTI INCR EXPIRE EXEC", p.execute(), want)
check("TTL after the transaction", r.ttl("ip:1"), 10)

# ... and its other form: EXPIRE only when INCR returned 1.
check("INCR new key", r.incr("ip:2"), 1)
check("EXPIRE at count 1", r.expire("ip:2", 10), True)
check("INCR again", r.incr("ip:2"), 2)
check("TTL kept", r.ttl("ip:2"), 10)

# SET NX PX, the lock/limit idiom.
check("SET NX PX new", r.set("lock:1", "holder", nx=True, px=1500), True)
check("SET NX PX taken", r.set("lock:1", "other", nx=True, px=1500), None)
check("PTTL", r.pttl("lock:1"), 1500)
check("GET", r.get("lock:1"), "holder")

# CL.THROTTLE, as redis-cell answers it.
check("CL.THROTTLE user123", r.execute_command("CL.THROTTLE", "user123", 15, 30, 60), [0, 16, 15, -1, 2])
check("CL.THROTTLE k first", r.execute_command("CL.THROTTLE", "k", 0, 1, 2, 1), [0, 1, 0, -1, 2])
check("CL.THROTTLE k again", r.execute_command("CL.THROTTLE", "k", 0, 1, 2, 1), [1, 1, 0, 2, 2])
check("CL.THROTTLE k2", r.execute_command("CL.THROTTLE", "k2", 5, 5, 3600), [0, 6, 5, -1, 720])

# Pipelined RL.ALLOW: seven at a limit of five.
p = r.pipeline(transaction=False)
for _ in range(7):
    p.execute_command("RL.ALLOW", "client:1", "five")
replies = p.execute()
check("pipelined allowed", [x[0] for x in replies], [1, 1, 1, 1, 1, 0, 0])
check("pipelined remaining", [x[2] for x in replies], [4, 3, 2, 1, 0, 0, 0])

# Errors arrive as the client's error type.
expect_error("unknown command", lambda: r.execute_command("NOSUCHCMD", "x"), "unknown command 'NOSUCHCMD'")
expect_error("bad cost", lambda: r.execute_command("RL.ALLOW", "k", "five", "abc"), "value is not an integer or out of range")
expect_error("bad CL.THROTTLE", lambda: r.execute_command("CL.THROTTLE", "k", "x", 1, 1), "Couldn't parse as integer: x")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("redis-py: all patterns passed")
