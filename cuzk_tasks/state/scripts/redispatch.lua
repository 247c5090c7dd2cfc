-- redispatch: with HOST_AFFINE a PLACED partition in pending, synthesizing, synth_done or proving
-- with this attempt -> pending, attempt + 1, unplaced (_lib.lua back_for_retry: its witness
-- was on the lost host).  Otherwise a ROUTED partition in synth_done or proving with this attempt -> synth_done,
-- attempt + 1, worker/token cleared from the PARTITION (never from the worker hash), out of
-- the old routed set, into unrouted.  Guarded by the attempt (and, when A(4) is not '', by
-- the worker it is routed to): of two sweepers only one wins.  A partition that is not
-- routed (already waiting in unrouted) is rejected: re-dispatching it would change nothing
-- but the attempt, and a sweeper that read it after another one won must lose.
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] unrouted set (_lib.lua back_to_unrouted
-- builds the same keys from the prefix, and the old routed set).
-- A(1) job, A(2) idx, A(3) attempt, A(4) worker or ''.
-- Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if js ~= 'running' then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker')
if not p[1] then return {0, 'unknown'} end
local placed = HOST_AFFINE and (p[1] == 'pending' or p[1] == 'synthesizing')
if tonumber(p[2]) ~= tonumber(A(3)) or (p[1] ~= 'synth_done' and p[1] ~= 'proving' and not placed) then
  return {0, 'stale'}
end
if blank(p[3]) then return {0, 'not_routed'} end
if A(4) ~= '' and p[3] ~= A(4) then return {0, 'stale'} end
back_for_retry(A(1), A(2), p[3], tonumber(p[2]) + 1)
redis.call('HINCRBY', KEYS[2], 'redispatches', 1)
emit('redispatch', 'job', A(1), 'idx', A(2), 'attempt', tonumber(p[2]) + 1, 'from_worker', p[3])
return {1, 'ok'}
