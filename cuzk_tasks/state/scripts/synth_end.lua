-- synth_end: partition synthesizing -> synth_done.  With HOST_AFFINE a partition placed on a
-- device while pending (route_core) gets its prove_start A(9) for that device's queue and
-- keeps its input.  Otherwise: job:idx joins the unrouted set; the
-- partition's inline input (up to max_inline_input_bytes) is deleted: the witness replaces it.  With
-- A(7) = '1' the partition is then routed in the same step (_lib.lua route_core: the best
-- live device for circuit A(8), its prove_start message A(9) added to the outbox for that
-- device's queue); with no live device it stays unrouted (the sweeper
-- routes it when one appears).
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] unrouted set.
-- A(1) job, A(2) idx, A(3) attempt, A(4) witness_ref ('' = keep), A(5) synth_ms,
-- A(6) the circuit's curve (snarkjs name, '' = unknown): the job's `curve`, set once.
-- Returns {ok 0|1, reason, routed worker or '', its queue or ''}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown', '', ''} end
if js ~= 'running' then return {0, 'job_' .. js, '', ''} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker')
if not p[1] then return {0, 'unknown', '', ''} end
if p[1] ~= 'synthesizing' or tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale', '', ''} end
redis.call('HSET', KEYS[2], 'state', 'synth_done', 'synth_ms', A(5), 't_synth_end', NOW_S)
if A(6) ~= '' then redis.call('HSETNX', KEYS[1], 'curve', A(6)) end
emit('synth_end', 'job', A(1), 'idx', A(2), 'attempt', A(3), 'synth_ms', A(5))
if HOST_AFFINE and not blank(p[3]) then
  -- placed (route_core) before its synthesize: its prove_start goes to that device, on this
  -- host.  The witness lives in this host's spool only, so the partition keeps its input
  -- and its submitted witness_ref: if the device or host is lost it is synthesized again
  -- elsewhere (back_for_retry).  A device that died meanwhile is the sweeper's: it sends
  -- the partition back to pending with the next attempt, and this message is then stale.
  local queue = redis.call('HGET', K.worker(p[3]), 'queue') or ''
  if A(7) == '1' and not blank(A(9)) and not blank(queue) then
    outbox_add('{"queue": ' .. cjson.encode(queue) .. ', ' .. string.sub(A(9), 2))
  end
  return {1, 'ok', p[3], queue}
end
if A(4) ~= '' then redis.call('HSET', KEYS[2], 'witness_ref', A(4)) end
-- the inline input is not needed once the witness exists (a re-proof starts from it)
redis.call('HDEL', KEYS[2], 'input')
redis.call('SADD', KEYS[3], member(A(1), A(2)))
if A(7) ~= '1' then return {1, 'ok', '', ''} end
local r = route_core(A(1), A(2), A(3), '', A(8), A(9))
if r[1] == 1 then return {1, 'ok', r[3], r[4]} end
return {1, 'unrouted', '', ''}
