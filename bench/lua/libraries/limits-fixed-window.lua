-- Test data for bench/harness (bench/run.sh --scripts-only), not rlserver code.
-- From: limits 2.8.0 (Python; Debian's python3-limits 2.8.0-1; https://github.com/alisaifee/limits),
-- limits/resources/redis/lua_scripts/incr_expire.lua.
-- RedisStorage.incr sends it by EVALSHA for FixedWindowRateLimiter.hit (and
-- Flask-Limiter's fixed window). KEYS[1]: the key; ARGV: expiry in seconds,
-- amount.
-- Copied byte for byte from the installed package; the harness loads only what
-- follows the "-- script" line below and refuses a body whose SHA1 is not this:
-- sha1 628bd136a573a06b346879695681af12ccef300f
-- Licence: MIT (Debian: Expat); the package's licence text:
--
--   Copyright (c) 2015-2022 Ali-Akber Saifee
--
--   Permission is hereby granted, free of charge, to any person obtaining a copy
--   of this software and associated documentation files (the "Software"), to deal
--   in the Software without restriction, including without limitation the rights to
--   use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
--   of the Software, and to permit persons to whom the Software is furnished to do
--   so, subject to the following conditions:
--
--   The above copyright notice and this permission notice shall be included in all
--   copies or substantial portions of the Software.
--
--   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
--   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
--   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
--   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
--   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
--   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
--   SOFTWARE.
--
-- script (as the library sends it, from the next byte to the end of the file):
local current
local amount = tonumber(ARGV[2])
current = redis.call("incrby", KEYS[1], amount)

if tonumber(current) == amount then
    redis.call("expire", KEYS[1], ARGV[1])
end

return current
