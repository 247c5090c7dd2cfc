-- prove_fault: a run on a DEVICE failed because of the device -- not because of the
-- partition's input.  Either its prove raised a GpuError (a CUDA error, out of memory
-- after eviction, a kernel that does not compile, no usable device; the partition is in
-- proving), or the proof made from its partial failed self-verification in finalize (in_state
-- 'finalizing': a kernel may have returned a wrong result).  Two effects, as prove_end:
--  * worker: compare-and-delete on this run's token;
--  * partition, only if this run is its current one (in that state, this attempt, this
--    token): the faulted worker joins its `avoid` list, `device_faults` += 1 (and, after a
--    self-verification failure, `verify_faults` += 1), and it goes back to synth_done with
--    attempt + 1 and is routed to the best OTHER live device with its prove sent
--    (route_core; the message carries attempt + 1).  After max faults, after a second
--    self-verification failure (two independent devices agree: a bad witness), or with no
--    other live device, the partition (and so its job) fails with the error.
-- KEYS[1] partition hash, KEYS[2] worker hash.
-- ARGS (named, _lib.lua): job, idx, attempt, worker, token, error, circuit, max_faults,
-- message -- the retry's prove; with HOST_AFFINE its synthesize: it goes back to
-- pending -- (an outbox entry without its queue; '' = none), in_state -- the partition's
-- state for this run: 'proving' or 'finalizing'.
-- Returns {worker_cleared 0|1, outcome ('rerouted'|'failed'|'stale'), new worker, queue}.
local ARGS = named_args()
local job, idx, attempt, worker, token = ARGS.job, ARGS.idx, ARGS.attempt, ARGS.worker, ARGS.token
local err = ARGS.error
local in_state = blank(ARGS.in_state) and 'proving' or ARGS.in_state
local cleared = clear_worker_if(worker, token)
local p = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'worker', 'token', 'avoid')
if not (p[1] == in_state and (in_state == 'proving' or in_state == 'finalizing')
        and tonumber(p[2]) == tonumber(attempt) and p[4] == token and not blank(token)) then
  emit('prove_fault', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker,
    'token', token, 'worker_cleared', cleared, 'outcome', 'stale', 'error', err)
  return {cleared, 'stale', '', ''}
end
local avoid = p[5] or ''
local avoid_set = csv_set(avoid)
if not avoid_set[worker] then
  avoid = blank(avoid) and worker or (avoid .. ',' .. worker)
end
local faults = redis.call('HINCRBY', KEYS[1], 'device_faults', 1)
local verify_faults = 0
if in_state == 'finalizing' then verify_faults = redis.call('HINCRBY', KEYS[1], 'verify_faults', 1) end
redis.call('HSET', KEYS[1], 'avoid', avoid, 'last_device_error', err)
local kind = redis.call('HGET', K.job(job), 'kind') or ''
redis.call('HINCRBY', K.counters(), 'prove_faults:' .. kind, 1)
local function fail(reason)
  fail_core(job, idx, reason, token)
  emit('prove_fault', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker,
    'token', token, 'worker_cleared', cleared, 'outcome', 'failed', 'error', err)
  return {cleared, 'failed', '', ''}
end
if verify_faults >= 2 then
  return fail(string.format('%s (on two devices, %s: the witness, not a device, is wrong)',
    err, avoid))
end
if faults >= tonumber(ARGS.max_faults) then
  return fail(string.format('device error on %d devices; last on %s: %s', faults, worker, err))
end
-- back to synth_done with the next attempt, as redispatch does
local next_attempt = tonumber(p[2]) + 1
-- with HOST_AFFINE placed again, and synthesized again on the new device's host (the
-- message: its synthesize)
back_for_retry(job, idx, p[3], next_attempt)
local r = route_core(job, idx, next_attempt, '', ARGS.circuit, ARGS.message)
if r[1] ~= 1 then
  return fail(string.format('device error on %s and no other live device to retry on: %s',
    worker, err))
end
emit('prove_fault', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker,
  'token', token, 'worker_cleared', cleared, 'outcome', 'rerouted', 'to_worker', r[3], 'error', err)
return {cleared, 'rerouted', r[3], r[4]}
