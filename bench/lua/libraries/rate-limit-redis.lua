-- Test data for bench/harness (bench/run.sh --scripts-only), not rlserver code.
-- From: rate-limit-redis 6.0.1 (npm; https://github.com/express-rate-limit/rate-limit-redis),
-- dist/index.cjs, scripts.increment after its own replaceAll(/^\s+/gm, "").trim().
-- RedisStore sends SCRIPT LOAD at start, then EVALSHA for every request
-- express-rate-limit counts. KEYS[1]: the key; ARGV[1]: the window in ms.
-- Copied byte for byte from the installed package; the harness loads only what
-- follows the "-- script" line below and refuses a body whose SHA1 is not this:
-- sha1 895b92e1712734e1b464999be23953485475357b
-- Licence: MIT; the package's licence text:
--
--   MIT License
--
--   Copyright (c) 2023 Wyatt Johnson, Nathan Friedly, Vedant K
--
--   Permission is hereby granted, free of charge, to any person obtaining a copy of
--   this software and associated documentation files (the "Software"), to deal in
--   the Software without restriction, including without limitation the rights to
--   use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of
--   the Software, and to permit persons to whom the Software is furnished to do so,
--   subject to the following conditions:
--
--   The above copyright notice and this permission notice shall be included in all
--   copies or substantial portions of the Software.
--
--   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
--   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS
--   FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR
--   COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER
--   IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
--   CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
--
-- script (as the library sends it, from the next byte to the end of the file):
local windowMs = tonumber(ARGV[1])
local timeToExpire = redis.call("PTTL", KEYS[1])
if timeToExpire <= 0 then
redis.call("SET", KEYS[1], 1, "PX", windowMs)
return { 1, windowMs }
end
local totalHits = redis.call("INCR", KEYS[1])        
return { totalHits, timeToExpire }