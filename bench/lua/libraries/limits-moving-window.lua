-- Test data for bench/harness (bench/run.sh --scripts-only), not rlserver code.
-- From: limits 2.8.0 (Python; Debian's python3-limits 2.8.0-1; https://github.com/alisaifee/limits),
-- limits/resources/redis/lua_scripts/acquire_moving_window.lua.
-- RedisStorage.acquire_entry sends it by EVALSHA for MovingWindowRateLimiter.hit
-- (and Flask-Limiter's moving window). KEYS[1]: the list; ARGV: now in
-- seconds (a float), limit, expiry in seconds, amount.
-- Copied byte for byte from the installed package; the harness loads only what
-- follows the "-- script" line below and refuses a body whose SHA1 is not this:
-- sha1 d19f37c18768a509dbf1310a257bfc35be65609f
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
local amount = tonumber(ARGV[4])
local entry = redis.call('lindex', KEYS[1], tonumber(ARGV[2]) - amount)
local timestamp = tonumber(ARGV[1])
local expiry = tonumber(ARGV[3])

if entry and tonumber(entry) >= timestamp - expiry then
    return false
end
local limit = tonumber(ARGV[2])
local entries= {}
for i=1, amount do
    entries[i] = timestamp
end
redis.call('lpush', KEYS[1], unpack(entries))
redis.call('ltrim', KEYS[1], 0, limit - 1)
redis.call('expire', KEYS[1], expiry)

return true
