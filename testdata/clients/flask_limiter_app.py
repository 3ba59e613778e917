"""Drives Flask-Limiter (Debian's python3-flask-limiter) against the server
at argv[1] (host:port): a tiny Flask app whose routes carry a limit of 5 per
10 s, one route per strategy that keeps its state in Redis, each hit 7 times
through Flask's test client, then the extension's view of the limit
(current_limit), a clear of the limit, and a hit after it; then a
reset of the whole storage (limiter.reset(): a script deleting every key
it finds with KEYS, none of them declared) after the route is exhausted
again, and a hit after that. It prints every
decision and the X-RateLimit headers that do not depend on the moment (the
reset time is left out), so two servers can be compared line by line
(cmd/rlserver's TestRateLimiterLibraries does). Any error fails the run.

Run with /usr/bin/python3: Debian installs Flask-Limiter for the system
Python.
"""
import sys

from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

STRATEGIES = ["fixed-window", "moving-window", "fixed-window-elastic-expiry"]
LIMIT = "5 per 10 seconds"


def run(strategy):
    app = Flask(__name__)
    app.testing = True  # a storage error fails the run instead of becoming a 500
    limiter = Limiter(get_remote_address, app=app, storage_uri="redis://" + sys.argv[1],
                      strategy=strategy, headers_enabled=True, swallow_errors=False,
                      in_memory_fallback_enabled=False, key_prefix=strategy)

    @app.route("/")
    @limiter.limit(LIMIT)
    def index():
        return "ok"

    seen = {}

    @app.after_request
    def keep_current_limit(res):
        seen["current"] = limiter.current_limit  # the limit this request was checked against
        return res

    name = "flask-limiter " + strategy
    client = app.test_client()
    admitted = 0
    for i in range(7):
        res = client.get("/")
        admitted += res.status_code == 200
        print(name, "hit", i, "status", res.status_code,
              "limit", res.headers.get("X-RateLimit-Limit"),
              "remaining", res.headers.get("X-RateLimit-Remaining"))
    print(name, "admitted", admitted)
    current = seen["current"]
    print(name, "current limit", current.limit, "breached", current.breached, "remaining", current.remaining)
    # The app's reset of one client's limit: clear it in the storage.
    limiter.limiter.clear(current.limit, *current.request_args)
    print(name, "after clear test", limiter.limiter.test(current.limit, *current.request_args))
    res = client.get("/")
    print(name, "after clear status", res.status_code, "remaining", res.headers.get("X-RateLimit-Remaining"))
    for _ in range(6):
        res = client.get("/")
    print(name, "before reset status", res.status_code)
    limiter.reset()
    res = client.get("/")
    print(name, "after reset status", res.status_code, "remaining", res.headers.get("X-RateLimit-Remaining"))


for s in STRATEGIES:
    run(s)
