-- snapshot (read): everything the status panel shows, in ONE script run (consistent).
-- No KEYS: all keys are built from the prefix (the job and worker sets decide which).
-- A(1) recent jobs, A(2) failures, A(3) JSON list of throughput windows (s),
-- A(4) JSON list of [queue name, [list keys]], A(5) JSON list of partition fields.
-- Returns JSON {now, workers, active, recent, queues, counters, throughput, failures}.
local recent_n, failures_n = tonumber(A(1)), tonumber(A(2))
local windows, queues, pfields = cjson.decode(A(3)), cjson.decode(A(4)), cjson.decode(A(5))
local function job_record(job)
  local fields = redis.call('HGETALL', K.job(job))
  local n = tonumber(redis.call('HGET', K.job(job), 'n_partitions') or '0')
  local parts = {}
  for i = 0, n - 1 do
    parts[#parts + 1] = redis.call('HMGET', K.part(job, i), unpack(pfields))
  end
  return {id = job, fields = fields, parts = parts}
end
local workers = {}
for _, w in ipairs(redis.call('SMEMBERS', K.workers())) do workers[#workers + 1] = worker_record(w) end
local active = {}
for _, j in ipairs(redis.call('ZRANGE', K.jobs_active(), 0, -1)) do active[#active + 1] = job_record(j) end
local recent = {}
if recent_n > 0 then
  for _, j in ipairs(redis.call('ZREVRANGE', K.jobs_recent(), 0, recent_n - 1)) do
    if redis.call('EXISTS', K.job(j)) == 1 then recent[#recent + 1] = job_record(j) end
  end
end
local qout = {}
for _, q in ipairs(queues) do
  local depth = 0
  for _, key in ipairs(q[2]) do depth = depth + redis.call('LLEN', key) end
  qout[#qout + 1] = {q[1], depth}
end
local through = {}
for _, w in ipairs(windows) do
  through[#through + 1] = {w, redis.call('ZCOUNT', K.completions(), tostring(NOW - w), '+inf')}
end
local failures = {}
if failures_n > 0 then failures = redis.call('LRANGE', K.failures(), 0, failures_n - 1) end
return cjson.encode({now = NOW_S, workers = workers, active = active, recent = recent,
  queues = qout, counters = redis.call('HGETALL', K.counters()), throughput = through,
  failures = failures})
