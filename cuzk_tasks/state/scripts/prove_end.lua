-- prove_end: a run's prove is over.  Two independent effects:
--  * worker: compare-and-delete -- idle only if the worker still holds THIS token;
--  * partition: proving -> finalizing only if it is in proving with this attempt and records this
--    token (the run that ends is the partition's current run); leaves the routed set.
-- KEYS[1] partition hash, KEYS[2] worker hash.
-- ARGS (named, _lib.lua): job, idx, attempt, worker, token, prove_ms, message -- the
-- finalize message (an outbox entry, cuzk_tasks/service/messages.py), added only when the
-- partition advanced, in the same step ('' = none); from a relay store (a device) it goes to
-- the relay: the device reads this step's reply late, if at all (StateStore.send_prove_end).
-- A lone run's device sends this step with no message and publishes the finalize itself
-- right after (pipeline/prove.py); should that finalize still get here first, the partition
-- is done already (finalize_end from proving), which is not an advance.
-- Returns {worker_cleared 0|1, partition_advanced 0|1}.
local ARGS = named_args()
local job, idx, attempt, worker, token = ARGS.job, ARGS.idx, ARGS.attempt, ARGS.worker, ARGS.token
local cleared = clear_worker_if(worker, token)
local advanced = 0
local p = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'worker', 'token')
if p[1] == 'proving' and tonumber(p[2]) == tonumber(attempt) and p[4] == token and token ~= '' then
  redis.call('HSET', KEYS[1], 'state', 'finalizing', 'prove_ms', ARGS.prove_ms, 't_prove_end', NOW_S)
  unindex(job, idx, p[3])
  redis.call('HINCRBY', K.job(job), 'n_proved', 1)  -- the estimates' work left (_lib.lua)
  advanced = 1
  outbox_add(ARGS.message)
elseif p[1] == 'done' and tonumber(p[2]) == tonumber(attempt) and p[4] == token and token ~= '' then
  -- this run's finalize got here first (finalize_end from proving): its device time is
  -- still recorded
  redis.call('HSET', KEYS[1], 'prove_ms', ARGS.prove_ms, 't_prove_end', NOW_S)
end
emit('prove_end', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker, 'token', token,
  'worker_cleared', cleared, 'partition_advanced', advanced)
return {cleared, advanced}
