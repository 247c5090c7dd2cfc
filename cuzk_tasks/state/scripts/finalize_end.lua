-- finalize_end: partition finalizing (or proving, when its run ended without prove_end) -> done;
-- job n_done += 1; the job -> done for exactly one caller ever, in the same step its
-- result is stored (K.result, TTL result_ttl s) and its on_done callback pushed; until then its
-- next held synthesize message, if any, is released (_lib.lua release_held).  The last
-- partition of a job of more than CHUNK partitions only marks it 'completing' for the reaper
-- (reap_jobs.lua), which stores the result and ends the job in short steps.
-- Then compare-and-delete on the partition's recorded worker with token (the finished run's)
-- or, when token is '', the partition's recorded token -- only if the partition was in
-- finalizing (in proving a redelivered run of it may still be in flight on that worker).
-- KEYS[1] job hash, KEYS[2] partition hash.
-- ARGS (named, _lib.lua): job, idx, attempt, finalize_ms, proof (JSON), public (JSON), token,
-- result_ttl (s), on_done_max_bytes (the most bytes of proofs the on_done callback carries).
-- Returns {ok 0|1, job_complete 0|1, reason}.
local ARGS = named_args()
local job, idx, attempt = ARGS.job, ARGS.idx, ARGS.attempt
local j = redis.call('HMGET', KEYS[1], 'state', 'kind', 'n_partitions', 'circuit')
if not j[1] then return {0, 0, 'unknown'} end
if j[1] ~= 'running' then return {0, 0, 'job_' .. j[1]} end
if deadline_passed(job) then return {0, 0, 'deadline'} end  -- a late proof is worthless
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker', 'token')
if not p[1] then return {0, 0, 'unknown'} end
if tonumber(p[2]) ~= tonumber(attempt) or (p[1] ~= 'finalizing' and p[1] ~= 'proving') then
  return {0, 0, 'stale'}
end
redis.call('HSET', KEYS[2], 'state', 'done', 'finalize_ms', ARGS.finalize_ms, 'proof', ARGS.proof,
  'public', ARGS.public,
  't_done', NOW_S)
-- kept until now with host-affine stages (a lost host's partition is synthesized again)
redis.call('HDEL', KEYS[2], 'input')
unindex(job, idx, p[3])
local tok = ARGS.token
if blank(tok) and p[1] == 'finalizing' then tok = p[4] end
clear_worker_if(p[3], tok)
local kind = j[2] or ''
local n_done = redis.call('HINCRBY', KEYS[1], 'n_done', 1)
redis.call('HINCRBY', K.counters(), 'completed:' .. kind, 1)
observe_phases(KEYS[2])
observe_estimates(j[4] or '', KEYS[2], p[3])
redis.call('ZADD', K.completions(), NOW_S, member(job, idx) .. ':' .. attempt)
redis.call('ZREMRANGEBYSCORE', K.completions(), '-inf', '(' .. tostring(NOW - COMPLETIONS_KEPT_S))
emit('partition_done', 'job', job, 'idx', idx, 'attempt', attempt, 'finalize_ms', ARGS.finalize_ms)
local complete = 0
if n_done == tonumber(j[3]) and n_done > CHUNK then
  -- a big job: the reaper writes its result CHUNK partitions per step, then ends it (done,
  -- on_done) in the step that stores it; meanwhile it stays running, no deadline can fail it
  redis.call('HSET', KEYS[1], 'completing', 1, 'result_next', 0, 'result_ttl', ARGS.result_ttl)
  redis.call('ZREM', K.jobs_deadlines(), job)
  redis.call('ZADD', K.jobs_reaping(), 'NX', NOW_S, job)
  complete = 1
elseif n_done == tonumber(j[3]) then
  local proofs = store_result(job, 'done', ARGS.result_ttl)
  -- the on_done callback carries them only up to on_done_max_bytes: its base64, in Lua, holds
  -- Redis about 1 ms per 1-2 KB (beyond, "proofs": null; they are read from the result)
  if #proofs > tonumber(ARGS.on_done_max_bytes) then proofs = nil end
  finish_job(job, 'done', '', proofs)
  complete = 1
else
  release_held(job, 1)  -- the job's window moves on by one (JOB_WINDOW)
end
return {1, complete, 'ok'}
