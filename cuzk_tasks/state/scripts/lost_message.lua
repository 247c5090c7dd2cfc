-- lost_message: a partition waited for a stage message that is nowhere -- its queue was empty
-- and no worker held an unacknowledged copy, on two sweeps a heartbeat TTL apart.  kombu's
-- Redis transport loses a message that a worker popped just as its connection dropped (the
-- unacked copy is written after the pop).  Guarded by the state and attempt the sweeper saw.
--   pending     stays pending; synthesize is queued again (A(5)/A(6)).  A duplicate, had the
--               original survived after all, is harmless: synth_begin/synth_end take one run.
--   synth_done  (routed) and finalizing -> synth_done, attempt + 1, unrouted (a late original
--               is stale); the sweeper routes it again.  finalize's input -- the partial proof
--               -- was only in the lost message, so the partition is proved again.
-- KEYS[1] job hash, KEYS[2] partition hash.
-- A(1) job, A(2) idx, A(3) state seen, A(4) attempt seen, A(5) list key or '' (the caller
-- publishes), A(6) synthesize message payload (pending only).  Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker')
if p[1] ~= A(3) or tonumber(p[2]) ~= tonumber(A(4)) then return {0, 'stale'} end
if p[1] == 'pending' then
  enqueue(A(5), A(6))
elseif p[1] == 'synth_done' or p[1] == 'finalizing' then
  back_to_unrouted(A(1), A(2), p[3], tonumber(p[2]) + 1)
else
  return {0, 'stale'}
end
redis.call('HINCRBY', KEYS[2], 'lost_messages', 1)
emit('message_lost', 'job', A(1), 'idx', A(2), 'state', p[1], 'attempt', p[2], 'worker', p[3])
return {1, 'ok'}
