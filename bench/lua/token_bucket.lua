-- Token bucket for the side-by-side benchmark (bench/harness).
-- KEYS[1]: the bucket. ARGV: capacity, refill per second, cost.
-- State: a hash {tokens, ts (ms)}; the clock is Redis's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / 1000 -- tokens per ms
local cost = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1]) or capacity
local ts = tonumber(s[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate) + 1)
return {allowed, math.floor(tokens)}
