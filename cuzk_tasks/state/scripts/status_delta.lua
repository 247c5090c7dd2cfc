-- status_delta (read, web status page): the snapshot, incrementally.  ONE run, so the
-- answer is consistent at `last_id` (the newest event when it ran).
-- Every transition of a job or partition appends an event naming the job, so a reader that
-- holds the jobs as of event `cursor` only needs the jobs named by the events after it.
-- No KEYS: all keys are built from the prefix.
-- ARGS (named, _lib.lua): cursor (event id the caller's copy is current at; '' = full read),
-- max_events (folded in a delta; more = full read), recent_jobs, failures, windows (JSON
-- throughput windows, s), queues (JSON [[queue, [list keys]], ...]), part_fields (JSON
-- partition fields), bucket_s (series bucket), buckets (series buckets), lookback_s
-- (timeline look-back for a full read), lookback_events (max events for that look-back),
-- parts_per_job (the first that many; the job's counters cover the rest; '' = CHUNK).
-- Returns JSON {now, last_id, full 0|1, workers, active, recent, jobs = [{id, fields, parts}]
-- (every active/recent job on a full read, else the jobs named since cursor), queues,
-- counters, throughput, failures, series, acts = [[type, at, worker, token, job, idx]]}.
local ARGS = named_args()
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end
local function id_lt(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  return am < bm or (am == bm and as < bs)
end
local cursor, maxn = ARGS.cursor, tonumber(ARGS.max_events)
local PARTS_PER_JOB = tonumber(ARGS.parts_per_job) or CHUNK
local pfields = cjson.decode(ARGS.part_fields)
local last = redis.call('XREVRANGE', K.events(), '+', '-', 'COUNT', 1)
local last_id = (last[1] and last[1][1]) or '0-0'
local ACT = {prove_begin = true, prove_end = true, worker_idle = true}
local full = (cursor == '')
local entries = {}
if not full and cursor ~= last_id then
  local first = redis.call('XRANGE', K.events(), '-', '+', 'COUNT', 1)
  if first[1] and id_lt(cursor, first[1][1]) then
    full = true  -- trimmed past the cursor: events may be lost
  else
    entries = redis.call('XRANGE', K.events(), '(' .. cursor, last_id, 'COUNT', maxn + 1)
    if #entries > maxn then full = true end
  end
end
local touched, acts = {}, {}
local function act(f)
  if ACT[f[2]] then
    local m = {}
    for k = 1, #f, 2 do m[f[k]] = f[k + 1] end
    acts[#acts + 1] = {f[2], m.at or '', m.worker or '', m.token or '', m.job or '', m.idx or ''}
  end
end
if full then
  -- (XREVRANGE ... COUNT 0 answers nil: no look-back asked)
  if tonumber(ARGS.lookback_events) > 0 then
    local min_id = string.format('%d-0', math.floor((NOW - tonumber(ARGS.lookback_s)) * 1000))
    local back = redis.call('XREVRANGE', K.events(), last_id, min_id, 'COUNT',
      tonumber(ARGS.lookback_events))
    for i = #back, 1, -1 do act(back[i][2]) end
  end
else
  for _, e in ipairs(entries) do
    local f = e[2]
    for k = 3, #f, 2 do
      if f[k] == 'job' and f[k + 1] ~= '' then touched[f[k + 1]] = true; break end
    end
    act(f)
  end
end
local function job_record(job)
  local fields = redis.call('HGETALL', K.job(job))
  if #fields == 0 then return nil end
  local n = tonumber(redis.call('HGET', K.job(job), 'n_partitions') or '0')
  n = math.min(n, PARTS_PER_JOB)  -- bounded at any job size
  local parts = {}
  for i = 0, n - 1 do parts[#parts + 1] = redis.call('HMGET', K.part(job, i), unpack(pfields)) end
  return {id = job, fields = fields, parts = parts}
end
local workers = {}
for _, w in ipairs(redis.call('SMEMBERS', K.workers())) do workers[#workers + 1] = worker_record(w) end
local active = redis.call('ZRANGE', K.jobs_active(), 0, -1)
local recent = {}
if tonumber(ARGS.recent_jobs) > 0 then
  -- past the job retention a finished job's hash is gone before finish_job trims the index
  for _, j in ipairs(redis.call('ZREVRANGE', K.jobs_recent(), 0, tonumber(ARGS.recent_jobs) - 1)) do
    if redis.call('EXISTS', K.job(j)) == 1 then recent[#recent + 1] = j end
  end
end
local jobs = {}
if full then
  for _, j in ipairs(active) do jobs[#jobs + 1] = job_record(j) end
  for _, j in ipairs(recent) do jobs[#jobs + 1] = job_record(j) end
else
  for j, _ in pairs(touched) do
    local rec = job_record(j)
    if rec then jobs[#jobs + 1] = rec end
  end
end
local qout = {}
for _, q in ipairs(cjson.decode(ARGS.queues)) do
  local depth = 0
  for _, key in ipairs(q[2]) do depth = depth + redis.call('LLEN', key) end
  qout[#qout + 1] = {q[1], depth}
end
local through = {}
for _, w in ipairs(cjson.decode(ARGS.windows)) do
  through[#through + 1] = {w, redis.call('ZCOUNT', K.completions(), tostring(NOW - w), '+inf')}
end
local bucket_s, nb = tonumber(ARGS.bucket_s), tonumber(ARGS.buckets)
local series = {}
for b = 1, nb do
  local lo = NOW - (nb - b + 1) * bucket_s
  series[b] = redis.call('ZCOUNT', K.completions(), tostring(lo), '(' .. tostring(lo + bucket_s))
end
local failures = {}
if tonumber(ARGS.failures) > 0 then
  failures = redis.call('LRANGE', K.failures(), 0, tonumber(ARGS.failures) - 1)
end
return cjson.encode({now = NOW_S, last_id = last_id, full = full and 1 or 0, workers = workers,
  active = active, recent = recent, jobs = jobs, queues = qout,
  counters = redis.call('HGETALL', K.counters()), throughput = through, failures = failures,
  series = series, acts = acts})
