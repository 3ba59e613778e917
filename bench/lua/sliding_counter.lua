-- Sliding window counter for the side-by-side benchmark (bench/harness).
-- KEYS[1]: the key prefix. ARGV: limit, window (ms), cost.
-- State: one counter per aligned window, KEYS[1]..':'..window_index.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local index = math.floor(now / window)
local current_key = KEYS[1] .. ':' .. index
local previous = tonumber(redis.call('GET', KEYS[1] .. ':' .. (index - 1))) or 0
local current = tonumber(redis.call('GET', current_key)) or 0
local elapsed = now - index * window
local estimate = previous * (1 - elapsed / window) + current
if estimate + cost > limit then
  return {0, math.max(0, math.floor(limit - estimate))}
end
redis.call('INCRBY', current_key, cost)
redis.call('PEXPIRE', current_key, 2 * window)
return {1, math.max(0, math.floor(limit - estimate - cost))}
