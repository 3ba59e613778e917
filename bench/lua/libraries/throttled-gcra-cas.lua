-- Test data for bench/harness (bench/run.sh --scripts-only), not rlserver code.
-- From: github.com/throttled/throttled/v2 v2.15.0 (Go),
-- store/goredisstore.v9/goredisstore.go, the constant redisCASScript.
-- GCRARateLimiter's store runs it by EVAL (not EVALSHA) for every request on
-- a key that exists (CompareAndSwapWithTTL; a new key is SETNX + EXPIRE).
-- KEYS[1]: the key; ARGV: the old and new theoretical arrival time (ns),
-- TTL in seconds.
-- Copied byte for byte from the installed package; the harness loads only what
-- follows the "-- script" line below and refuses a body whose SHA1 is not this:
-- sha1 ebd682e30de074a6919bde872b507734c7c3ebe5
-- Licence: BSD-3-Clause; the package's licence text:
--
--   Copyright (c) 2018, Martin Angers and Contributors.
--   All rights reserved.
--
--   Redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met:
--
--   * Redistributions of source code must retain the above copyright notice, this list of conditions and the following disclaimer.
--
--   * Redistributions in binary form must reproduce the above copyright notice, this list of conditions and the following disclaimer in the documentation and/or other materials provided with the distribution.
--
--   * Neither the name of the author nor the names of its contributors may be used to endorse or promote products derived from this software without specific prior written permission.
--
--   THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
--
-- script (as the library sends it, from the next byte to the end of the file):

local v = redis.call('get', KEYS[1])
if v == false then
  return redis.error_reply("key does not exist")
end
if v ~= ARGV[1] then
  return 0
end
redis.call('setex', KEYS[1], ARGV[3], ARGV[2])
return 1
