-- synth_begin: partition pending -> synthesizing (job pending -> running).  A job past its
-- deadline fails instead (reason 'deadline').
-- A redelivered synthesize (state already synthesizing, same attempt) is accepted and
-- changes nothing: synthesis is idempotent (it rewrites the same spool file).
-- KEYS[1] job hash, KEYS[2] partition hash.  A(1) job, A(2) idx, A(3) attempt.
-- Returns {ok 0|1, reason, input, input_ref, witness_ref} (the partition's inputs, read in the
-- same step so synthesize needs no separate read; '' when rejected).
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
if deadline_passed(A(1)) then return {0, 'deadline'} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'input', 'input_ref', 'witness_ref')
if not p[1] then return {0, 'unknown'} end
if tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
local function inputs(reason) return {1, reason, p[3] or '', p[4] or '', p[5] or ''} end
if p[1] == 'synthesizing' then return inputs('redelivered') end
if p[1] ~= 'pending' then return {0, 'stale'} end
redis.call('HSET', KEYS[2], 'state', 'synthesizing', 't_synth_start', NOW_S)
if js == 'pending' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', NOW_S) end
emit('synth_begin', 'job', A(1), 'idx', A(2), 'attempt', A(3))
return inputs('ok')
