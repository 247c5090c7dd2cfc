-- synth_begin: partition pending -> synthesizing (job pending -> running).  A job past its
-- deadline fails instead (reason 'deadline').
-- A redelivered synthesize (state already synthesizing, same attempt) is accepted and
-- changes nothing else: synthesis is idempotent (it rewrites the same spool file).
-- With A(4) (max deliveries) each accepted delivery counts `synth_deliveries` (summed over
-- attempts, as prove_begin's `deliveries`): a synthesize whose process dies -- killed at the
-- hard time limit A(5) s, OOM, a crash -- is redelivered or re-driven by the sweeper with the
-- next attempt; past A(4) deliveries the partition and its job fail instead (reason 'poison').
-- KEYS[1] job hash, KEYS[2] partition hash.  A(1) job, A(2) idx, A(3) attempt,
-- A(4) max deliveries or '' (no count), A(5) the hard time limit in seconds (the message).
-- Returns {ok 0|1, reason, input, input_ref, witness_ref} (the partition's inputs, read in the
-- same step so synthesize needs no separate read; '' when rejected).
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
if deadline_passed(A(1)) then return {0, 'deadline'} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'input', 'input_ref', 'witness_ref')
if not p[1] then return {0, 'unknown'} end
if tonumber(p[2]) ~= tonumber(A(3)) then return {0, 'stale'} end
local function inputs(reason) return {1, reason, p[3] or '', p[4] or '', p[5] or ''} end
if p[1] ~= 'synthesizing' and p[1] ~= 'pending' then return {0, 'stale'} end
if not blank(A(4)) then
  local deliveries = redis.call('HINCRBY', KEYS[2], 'synth_deliveries', 1)
  if deliveries > tonumber(A(4)) then
    fail_core(A(1), A(2), string.format('synthesize was delivered %d times without finishing '
      .. '(its process died, or was killed at the hard time limit of %s s: witness generation '
      .. 'exceeded it?)', deliveries, A(5)), '')
    return {0, 'poison'}
  end
end
if p[1] == 'synthesizing' then return inputs('redelivered') end
redis.call('HSET', KEYS[2], 'state', 'synthesizing', 't_synth_start', NOW_S)
if js == 'pending' then redis.call('HSET', KEYS[1], 'state', 'running', 'started_at', NOW_S) end
emit('synth_begin', 'job', A(1), 'idx', A(2), 'attempt', A(3))
return inputs('ok')
