"""Drives Python's limits library (Debian's python3-limits, the storage
Flask-Limiter uses) against the server at argv[1] (host:port), through
issue 14's sequence: limit 5 per 10 s, 7 hits, then test, window stats,
clear and a hit of cost 2, for each strategy that keeps its state in Redis;
then the storage's reset (a script deleting every LIMITER* key it finds
with KEYS, none of them declared) and a hit after it.
It prints every decision, leaving out what depends on the moment (the
window's reset time), so two servers can be compared line by line
(cmd/rlserver's TestRateLimiterLibraries does). A strategy that fails
prints its error and the others still run.

Run with /usr/bin/python3: Debian installs limits for the system Python.
"""
import sys

from limits import parse, storage, strategies

st = storage.storage_from_string("redis://" + sys.argv[1])
print("check", st.check())
item = parse("5 per 10 seconds")
failed = False
for name, cls in [("fixed-window", strategies.FixedWindowRateLimiter),
                  ("moving-window", strategies.MovingWindowRateLimiter),
                  ("fixed-window-elastic", strategies.FixedWindowElasticExpiryRateLimiter)]:
    try:
        lim = cls(st)
        hits = [lim.hit(item, "user1", name) for _ in range(7)]
        for i, ok in enumerate(hits):
            print(name, "hit", i, "allowed" if ok else "denied")
        print(name, "admitted", sum(hits))
        print(name, "test", lim.test(item, "user1", name))
        print(name, "remaining", lim.get_window_stats(item, "user1", name)[1])
        lim.clear(item, "user1", name)
        print(name, "after clear: test", lim.test(item, "user1", name),
              "remaining", lim.get_window_stats(item, "user1", name)[1])
        print(name, "cost 2", lim.hit(item, "user1", name, cost=2),
              "remaining", lim.get_window_stats(item, "user1", name)[1])
    except Exception as e:  # report, and go on with the next strategy
        failed = True
        print(name, "error", type(e).__name__, e)
try:
    lim = strategies.FixedWindowRateLimiter(st)
    for _ in range(7):
        lim.hit(item, "user2", "reset")
    print("reset: user2 test", lim.test(item, "user2", "reset"))
    print("reset: keys deleted", st.reset())
    print("reset: user2 test", lim.test(item, "user2", "reset"),
          "remaining", lim.get_window_stats(item, "user2", "reset")[1])
except Exception as e:
    failed = True
    print("reset error", type(e).__name__, e)
sys.exit(1 if failed else 0)
