-- recover_stage: a partition's stage is held by no one -- its message is neither queued nor
-- reported by a live worker (no stage lease), on two sweeps a heartbeat TTL apart
-- (Sweeper.recover_stages).  The message was lost (kombu loses one popped just as its
-- connection dropped) or is stranded in kombu's unacked hash (its worker died, or lost it
-- in a reconnect) until the visibility timeout.  The partition moves back one step with
-- attempt + 1, so the stranded original, should it come back, is a stale no-op:
--   pending, synthesizing       -> pending; its synthesize (for attempt + 1: A(5)) queued
--   synth_done (routed), proving, -> synth_done, unrouted (the sweeper routes it at once);
--   finalizing                       finalize's input -- the partial proof -- was only in the
--                                    message, so it is proved again.  In proving, the worker
--                                    that ran it goes idle by compare-and-delete on the
--                                    partition's token: no live worker holds that run.
-- With HOST_AFFINE every state goes back to pending, unplaced (_lib.lua back_for_retry), and
-- the sweeper places it again: a witness may exist only on the host that lost the stage.
-- Guarded by the state and attempt the sweeper saw.  KEYS[1] job hash, KEYS[2] partition hash.
-- A(1) job, A(2) idx, A(3) state seen, A(4) attempt seen, A(5) the synthesize message (an outbox
-- entry; pending, synthesizing).
-- Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker', 'token')
-- LEGACY: 'gpu' is the previous release's name of 'proving' (a store it wrote; its run went
-- with the old worker): recovered as a lost proving.  May go after one release.
if p[1] == 'gpu' then p[1] = 'proving' end
if p[1] ~= A(3) or tonumber(p[2]) ~= tonumber(A(4)) then return {0, 'stale'} end
local next_attempt = tonumber(p[2]) + 1
if HOST_AFFINE and PART_LIVE[p[1]] then
  if p[1] == 'proving' then clear_worker_if(p[3], p[4]) end
  back_for_retry(A(1), A(2), p[3], next_attempt)
elseif p[1] == 'pending' or p[1] == 'synthesizing' then
  redis.call('HSET', KEYS[2], 'state', 'pending', 'attempt', next_attempt)
  outbox_add(A(5))
elseif p[1] == 'synth_done' or p[1] == 'proving' or p[1] == 'finalizing' then
  if p[1] == 'proving' then clear_worker_if(p[3], p[4]) end
  back_to_unrouted(A(1), A(2), p[3], next_attempt)
else
  return {0, 'stale'}
end
redis.call('HINCRBY', KEYS[2], 'lost_messages', 1)
emit('stage_lost', 'job', A(1), 'idx', A(2), 'state', p[1], 'attempt', next_attempt,
  'worker', p[3])
return {1, 'ok'}
