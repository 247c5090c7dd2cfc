-- synth_begin: partition pending -> synthesizing (job pending -> running).
-- A redelivered synthesize (state already synthesizing, same attempt) is accepted and
-- changes nothing: synthesis is idempotent (it rewrites the same spool file).
-- KEYS[1] job hash, KEYS[2] partition hash.  A(1) job, A(2) idx, A(3) attempt.
-- Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt')
if not p[1] then return {0, 'unknown'} end
if tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
if p[1] == 'synthesizing' then return {1, 'redelivered'} end
if p[1] ~= 'pending' then return {0, 'stale'} end
redis.call('HSET', KEYS[2], 'state', 'synthesizing', 't_synth_start', NOW_S)
if js == 'pending' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', NOW_S) end
emit('synth_begin', 'job', A(1), 'idx', A(2), 'attempt', A(3))
return {1, 'ok'}
