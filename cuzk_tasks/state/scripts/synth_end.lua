-- synth_end: partition synthesizing -> synth_done.  With HOST_AFFINE a partition placed on a
-- device while pending (route_core) gets its prove (message) for that device's queue
-- and keeps its input.  Otherwise: job:idx joins the unrouted set; the
-- partition's inline input (up to max_inline_input_bytes) is deleted: the witness replaces it.  With
-- route = '1' the partition is then routed in the same step (_lib.lua route_core: the best
-- live device for circuit, its prove message added to the outbox for that
-- device's queue); with no live device it stays unrouted (the sweeper
-- routes it when one appears).
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] unrouted set.
-- ARGS (named, _lib.lua): job, idx, attempt, witness_ref ('' = keep), synth_ms, curve -- the
-- circuit's curve (snarkjs name, '' = unknown): the job's `curve`, set once --, route ('1':
-- route it, '0': leave it unrouted), circuit and message ('' when route is '0').
-- Returns {ok 0|1, reason, routed worker or '', its queue or ''}.
local ARGS = named_args()
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown', '', ''} end
if js ~= 'running' then return {0, 'job_' .. js, '', ''} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker')
if not p[1] then return {0, 'unknown', '', ''} end
if p[1] ~= 'synthesizing' or tonumber(p[2]) ~= tonumber(ARGS.attempt) then
  return {0, 'stale', '', ''}
end
redis.call('HSET', KEYS[2], 'state', 'synth_done', 'synth_ms', ARGS.synth_ms, 't_synth_end', NOW_S)
if ARGS.curve ~= '' then redis.call('HSETNX', KEYS[1], 'curve', ARGS.curve) end
emit('synth_end', 'job', ARGS.job, 'idx', ARGS.idx, 'attempt', ARGS.attempt,
  'synth_ms', ARGS.synth_ms)
if HOST_AFFINE and not blank(p[3]) then
  -- placed (route_core) before its synthesize: its prove goes to that device, on this
  -- host.  The witness lives in this host's spool only, so the partition keeps its input
  -- and its submitted witness_ref: if the device or host is lost it is synthesized again
  -- elsewhere (back_for_retry).  A device that died meanwhile is the sweeper's: it sends
  -- the partition back to pending with the next attempt, and this message is then stale.
  local queue = redis.call('HGET', K.worker(p[3]), 'queue') or ''
  if ARGS.route == '1' and not blank(ARGS.message) and not blank(queue) then
    outbox_add('{"queue": ' .. cjson.encode(queue) .. ', ' .. string.sub(ARGS.message, 2))
  end
  return {1, 'ok', p[3], queue}
end
if ARGS.witness_ref ~= '' then redis.call('HSET', KEYS[2], 'witness_ref', ARGS.witness_ref) end
-- the inline input is not needed once the witness exists (a re-proof starts from it)
redis.call('HDEL', KEYS[2], 'input')
redis.call('SADD', KEYS[3], member(ARGS.job, ARGS.idx))
if ARGS.route ~= '1' then return {1, 'ok', '', ''} end
local r = route_core(ARGS.job, ARGS.idx, ARGS.attempt, '', ARGS.circuit, ARGS.message)
if r[1] == 1 then return {1, 'ok', r[3], r[4]} end
return {1, 'unrouted', '', ''}
