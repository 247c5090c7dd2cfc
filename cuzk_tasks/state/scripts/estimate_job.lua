-- estimate_job: a live job's estimate now (_lib.lua estimate): its partitions not yet proved
-- behind the jobs ahead of it, as the devices now live would prove them.  Reads only.
-- KEYS[1] job hash.  ARGS: job.
-- Returns {eta_s (seconds from now), partitions ahead, devices}, or {} when the job is not
-- pending or running or has no estimate (no sample of its circuit, no live device).
local job = A(1)
local j = redis.call('HMGET', KEYS[1], 'state', 'circuit', 'priority', 'n_partitions', 'n_done',
  'n_failed', 'n_proved')
if j[1] ~= 'pending' and j[1] ~= 'running' then return {} end
local since = tonumber(redis.call('ZSCORE', K.jobs_active(), job) or '')
if not since then return {} end
local eta_ms, ahead, devices = estimate(j[2], j[3], unproved(j[4], j[5], j[6], j[7]), since, job)
if not eta_ms then return {} end
return {string.format('%.3f', eta_ms / 1000), ahead, devices}
