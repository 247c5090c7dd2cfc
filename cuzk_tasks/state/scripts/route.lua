-- route: a synth_done partition of this attempt, not yet routed, goes to one device worker.
-- Exactly one route per attempt succeeds (the caller sends the prove chain only then).
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] unrouted set, KEYS[4] routed set of the worker.
-- A(1) job, A(2) idx, A(3) attempt, A(4) worker.  Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if js ~= 'running' then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker')
if not p[1] then return {0, 'unknown'} end
if p[1] ~= 'synth_done' or tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
if not blank(p[3]) then return {0, 'already_routed'} end
local m = member(A(1), A(2))
redis.call('HSET', KEYS[2], 'worker', A(4), 't_routed', NOW_S)
redis.call('SREM', KEYS[3], m)
redis.call('SADD', KEYS[4], m)
emit('route', 'job', A(1), 'idx', A(2), 'attempt', A(3), 'worker', A(4))
return {1, 'ok'}
