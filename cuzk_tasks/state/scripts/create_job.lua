-- create_job: a job and its partitions, idempotent on request_id.
-- KEYS[1] job hash, KEYS[2] request key ('' when no request id; built by keys.py either way)
-- A(1) job id, A(2) circuit, A(3) kind, A(4) priority, A(5) request id ('' = none),
-- A(6) n partitions, then per partition 3 args: input, input_ref, witness_ref; then the
-- number of messages and per message 2 args: broker list key, payload (wire.py), pushed
-- only when the job is created -- the job and its first tasks appear together; then the
-- on_done spec (JSON {"task", "queue"}, '' = none) and its message (wire.LateBodyMessage
-- as JSON, kept under K.on_done(job) until the job ends: send_on_done); then the deadline in
-- seconds from now ('' = none): deadline_s and deadline_at on the job, K.jobs_deadlines().
-- Partition keys are built from the prefix.  Returns {job_id, created 0|1}.
local job, circuit, kind, prio, req, n = A(1), A(2), A(3), A(4), A(5), tonumber(A(6))
if req ~= '' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return {existing, 0} end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {job, 0} end
redis.call('HSET', KEYS[1], 'id', job, 'circuit', circuit, 'kind', kind, 'priority', prio,
  'request_id', req, 'state', 'pending', 'n_partitions', n, 'n_done', 0, 'n_failed', 0,
  'submitted_at', NOW_S, 'error', '')
for i = 0, n - 1 do
  local base = 6 + 3 * i
  redis.call('HSET', K.part(job, i), 'job', job, 'idx', i, 'state', 'pending', 'attempt', 0,
    'deliveries', 0, 'redispatches', 0, 'worker', '', 'token', '',
    'input', A(base + 1), 'input_ref', A(base + 2), 'witness_ref', A(base + 3),
    't_created', NOW_S, 'error', '')
end
if req ~= '' then redis.call('SET', KEYS[2], job) end
local mbase = 6 + 3 * n
for m = 1, tonumber(A(mbase + 1) or '0') do
  enqueue(A(mbase + 2 * m), A(mbase + 2 * m + 1))
end
local ondone = mbase + 2 * tonumber(A(mbase + 1) or '0') + 2
if not blank(A(ondone)) then
  redis.call('HSET', KEYS[1], 'on_done', A(ondone))
  redis.call('SET', K.on_done(job), A(ondone + 1))
end
local deadline_s = tonumber(A(ondone + 2) or '')
if deadline_s and deadline_s > 0 then
  local at = NOW + deadline_s
  redis.call('HSET', KEYS[1], 'deadline_s', A(ondone + 2), 'deadline_at', string.format('%.6f', at))
  redis.call('ZADD', K.jobs_deadlines(), string.format('%.6f', at), job)
end
redis.call('ZADD', K.jobs_active(), NOW_S, job)
emit('job_created', 'job', job, 'circuit', circuit, 'kind', kind, 'n_partitions', n)
return {job, 1}
