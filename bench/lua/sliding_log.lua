-- Sliding window log for the side-by-side benchmark (bench/harness).
-- KEYS[1]: the log (a sorted set of admission times). ARGV: limit,
-- window (ms), cost.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = now_us / 1000
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count + cost > limit then
  return {0, limit - count}
end
for i = 1, cost do
  -- Members must be unique: the time in µs and the entry's position.
  redis.call('ZADD', KEYS[1], now, now_us .. ':' .. (count + i))
end
redis.call('PEXPIRE', KEYS[1], window)
return {1, limit - count - cost}
