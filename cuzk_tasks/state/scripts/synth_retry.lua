-- synth_retry: synthesize met an outage of its own host -- the spool disk is full -- and hands
-- its partition back instead of failing it: synthesizing -> pending with attempt + 1, its
-- synthesize (for attempt + 1: A(5)) queued at the back of its queue, so the queued
-- finalizes, which free spool space, run first.  This delivery ended cleanly, so it does not
-- count towards max deliveries (synth_deliveries - 1); `outage_retries` counts the retries
-- and A(4), the reason, is kept in `last_outage` and emitted.
-- KEYS[1] job hash, KEYS[2] partition hash.
-- A(1) job, A(2) idx, A(3) attempt, A(4) reason, A(5) the synthesize message (an outbox entry).
-- Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'synth_deliveries')
if p[1] ~= 'synthesizing' or tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
redis.call('HSET', KEYS[2], 'state', 'pending', 'attempt', tonumber(p[2]) + 1, 'last_outage', A(4))
if (tonumber(p[3]) or 0) > 0 then redis.call('HINCRBY', KEYS[2], 'synth_deliveries', -1) end
redis.call('HINCRBY', KEYS[2], 'outage_retries', 1)
outbox_add(A(5))
emit('synth_retry', 'job', A(1), 'idx', A(2), 'attempt', tonumber(p[2]) + 1, 'reason', A(4))
return {1, 'ok'}
