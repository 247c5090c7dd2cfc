-- phase_histograms (web /metrics): fold partition_done events into phase-duration
-- histograms kept in Redis, so every web process and scraper sees the same cumulative
-- counts and no partition is counted twice (the cursor moves inside this script).
-- KEYS[1] histogram hash (field 'cursor' = last folded event id; '<phase>:<bucket index>',
-- '<phase>:sum', '<phase>:count').
-- A(1) JSON list of bucket upper bounds (ms, ascending; +Inf implied), A(2) max events.
-- Returns {events read, HGETALL of the hash}.
local bounds = cjson.decode(A(1))
local cursor = redis.call('HGET', KEYS[1], 'cursor') or '0-0'
local entries = redis.call('XRANGE', K.events(), '(' .. cursor, '+', 'COUNT', tonumber(A(2)))
local PHASES = {'synth_ms', 'gpu_ms', 'finalize_ms'}
local folded = 0
for _, e in ipairs(entries) do
  local f = e[2]
  if f[2] == 'partition_done' then
    local m = {}
    for k = 1, #f, 2 do m[f[k]] = f[k + 1] end
    local v = redis.call('HMGET', K.part(m.job, m.idx), unpack(PHASES))
    for i, phase in ipairs(PHASES) do
      local ms = tonumber(v[i])
      if ms then
        local b = #bounds
        for j = 1, #bounds do if ms <= bounds[j] then b = j - 1; break end end
        redis.call('HINCRBY', KEYS[1], phase .. ':' .. b, 1)
        redis.call('HINCRBYFLOAT', KEYS[1], phase .. ':sum', ms)
        redis.call('HINCRBY', KEYS[1], phase .. ':count', 1)
      end
    end
    folded = folded + 1
  end
  cursor = e[1]
end
redis.call('HSET', KEYS[1], 'cursor', cursor)
return {#entries, redis.call('HGETALL', KEYS[1])}
