-- GCRA (as redis-cell) for the side-by-side benchmark (bench/harness).
-- KEYS[1]: the key holding the theoretical arrival time (ms).
-- ARGV: burst, count per period, period (s), quantity.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local burst = tonumber(ARGV[1])
local interval = tonumber(ARGV[3]) * 1000 / tonumber(ARGV[2])
local tolerance = interval * (burst + 1)
local increment = interval * tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
local new_tat = math.max(tat, now) + increment
if now < new_tat - tolerance then
  return {1, math.ceil(new_tat - tolerance - now)}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(new_tat - now))
return {0, -1}
