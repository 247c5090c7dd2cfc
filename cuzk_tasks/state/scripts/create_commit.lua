-- create_commit: the last step of creating a job of more than CHUNK partitions (after its
-- create_parts.lua steps): the job becomes pending and visible at once (_lib.lua
-- activate_job: request id, jobs:active, deadline, on_done, its first window of synthesize
-- messages released).  When its request id meanwhile got a job (a concurrent submit of the
-- same request), that job is returned and this creation is discarded: left to the sweeper
-- (reap_creating.lua) at once.
-- KEYS[1] job hash, KEYS[2] request key (as create_job.lua).
-- ARGS (named, _lib.lua): job, request ('' = none), release ('1' when messages are held, ''
-- = none), window (0 = all), on_done (spec), on_done_message, deadline_s ('' = none) and
-- digest, as create_job.lua.
-- Returns {job_id, created 1|0|-1|-2}: -1 rejected (not a creation whose every step ran),
-- -2 the request id meanwhile names a job of other content (this creation discarded), or
-- {job_id, -3, eta_s, partitions ahead, devices}: its deadline_s is shorter than its
-- estimate (create_job.lua; this creation discarded).
local ARGS = named_args()
local job, req = ARGS.job, ARGS.request
local j = redis.call('HMGET', KEYS[1], 'state', 'n_written', 'n_partitions', 'discard',
  'circuit', 'priority')
if j[1] ~= 'creating' or not blank(j[4]) then return {job, -1} end
if req ~= '' then
  local existing = request_job(KEYS[2], ARGS.digest)
  if existing then
    redis.call('HSET', KEYS[1], 'discard', 1)
    redis.call('ZADD', K.jobs_creating(), 0, job)
    return existing
  end
end
if tonumber(j[2]) ~= tonumber(j[3]) then return {job, -1} end
local eta_ms, ahead, devices = estimate(j[5], j[6], tonumber(j[3]), NOW, job)
if misses(eta_ms, ARGS.deadline_s) then
  redis.call('HSET', KEYS[1], 'discard', 1)
  redis.call('ZADD', K.jobs_creating(), 0, job)
  return {job, -3, string.format('%.3f', eta_ms / 1000), ahead, devices}
end
activate_job(job, req, ARGS.release, ARGS.window, ARGS.on_done, ARGS.on_done_message,
  ARGS.deadline_s)
record_eta(job, eta_ms, ahead, devices)
return {job, 1}
