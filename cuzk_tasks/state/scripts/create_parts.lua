-- create_parts: one step of creating a job of more than CHUNK partitions -- partitions
-- first .. first + count - 1 and their held synthesize messages.  The first step (first = 0)
-- makes the job hash in state 'creating' and adds it to jobs:creating; no read API returns
-- such a job, no request id maps to it and no index but jobs:creating lists it, so until
-- create_commit.lua it does not exist for anyone else.  A creation whose submitter died is
-- deleted by the sweeper (reap_creating.lua); a retry of its request makes a new job.
-- KEYS[1] job hash, KEYS[2] request key (as create_job.lua).
-- ARGS (named, _lib.lua): job, circuit, kind, priority, request (id, '' = none),
-- n (partitions in all), first, count, n_messages (0 or count), digest (as create_job.lua).
-- After them, the data (_lib.lua data_base): per partition 3 args (input, input_ref, witness_ref), then the
-- n_messages outbox entries.
-- Returns {job_id, status}: status 2 written, 0 the request id (or the job id) already has
-- a job (the job id returned; nothing written), -2 that job has other content (the same),
-- -1 rejected (this creation was discarded or a step is missing).
local ARGS = named_args()
local job, req, first, count = ARGS.job, ARGS.request, tonumber(ARGS.first), tonumber(ARGS.count)
if first == 0 then
  if req ~= '' then
    local existing = request_job(KEYS[2], ARGS.digest)
    if existing then return existing end
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return {job, 0} end
  begin_job(job, ARGS.circuit, ARGS.kind, ARGS.priority, req, ARGS.n, 'creating')
  keep_request_digest(KEYS[1], req, ARGS.digest)
  redis.call('HSET', KEYS[1], 'n_written', 0)
  redis.call('ZADD', K.jobs_creating(), NOW_S, job)
end
local j = redis.call('HMGET', KEYS[1], 'state', 'n_written', 'discard')
if j[1] ~= 'creating' or not blank(j[3]) or tonumber(j[2]) ~= first then return {job, -1} end
local data = data_base()
write_partitions(job, first, count, data)
hold_messages(job, data + 3 * count, tonumber(ARGS.n_messages))
redis.call('HSET', KEYS[1], 'n_written', first + count)
return {job, 2}
