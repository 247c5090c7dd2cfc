-- fail_partition: any live partition -> failed (attempt must match unless A(3) is '');
-- the job -> failed on its first failure, its other live partitions -> cancelled.
-- Counters failed:{kind}, the failures list, out of routed/unrouted, and a
-- compare-and-delete of its worker with A(5) (the ending run's token) or, when '', the
-- partition's recorded token unless the partition is in proving (a run may be in flight).
-- KEYS[1] job hash, KEYS[2] partition hash.
-- A(1) job, A(2) idx, A(3) attempt or '', A(4) error, A(5) token or ''.
-- Returns {ok 0|1, reason}.
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt')
if not p[1] or redis.call('EXISTS', KEYS[1]) == 0 then return {0, 'unknown'} end
if not PART_LIVE[p[1]] then return {0, p[1]} end
if A(3) ~= '' and tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
fail_core(A(1), A(2), A(4), A(5))
return {1, 'ok'}
