-- device_activity (read, web status page): device busy intervals and completion series.
-- No KEYS: the events stream and completions zset are built from the prefix.
-- A(1) look-back (s) over the events stream, A(2) max events read (newest first),
-- A(3) series bucket (s), A(4) series window (s).
-- Returns JSON {now, last_id, events = [[type, at, worker, token, job, idx], ...] (oldest
-- first; only gpu_start, gpu_end, worker_idle, redispatch), truncated 0|1,
-- series = [count per bucket, oldest first]}.
local lookback, maxn = tonumber(A(1)), tonumber(A(2))
local bucket_s, series_s = tonumber(A(3)), tonumber(A(4))
local min_id = string.format('%d-0', math.floor((NOW - lookback) * 1000))
local entries = redis.call('XREVRANGE', K.events(), '+', min_id, 'COUNT', maxn)
local last = redis.call('XREVRANGE', K.events(), '+', '-', 'COUNT', 1)
local WANT = {gpu_start = true, gpu_end = true, worker_idle = true, redispatch = true}
local out = {}
for i = #entries, 1, -1 do
  local f = entries[i][2]
  local kind = f[2]
  if WANT[kind] then
    local m = {}
    for k = 1, #f, 2 do m[f[k]] = f[k + 1] end
    out[#out + 1] = {kind, m.at or '', m.worker or m.from_worker or '', m.token or '',
                     m.job or '', m.idx or ''}
  end
end
local nb = math.floor(series_s / bucket_s)
local start = NOW - nb * bucket_s
local series = {}
for b = 1, nb do series[b] = 0 end
local done = redis.call('ZRANGEBYSCORE', K.completions(), tostring(start), '+inf', 'WITHSCORES')
for k = 2, #done, 2 do
  local b = math.floor((tonumber(done[k]) - start) / bucket_s) + 1
  if b >= 1 and b <= nb then series[b] = series[b] + 1 end
end
return cjson.encode({now = NOW_S, last_id = (last[1] and last[1][1]) or '', events = out,
  truncated = (#entries >= maxn) and 1 or 0, series = series})
