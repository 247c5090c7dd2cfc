-- prove_begin: a device worker begins prove of one partition.
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] worker hash, KEYS[4] workers set.
-- A(1) job, A(2) idx, A(3) attempt, A(4) worker, A(5) max deliveries, A(6) nonce,
-- A(7) the message's circuit ('' = not checked: tests of the store alone).
-- Accepted: partition routed to this worker with this attempt, in synth_done (first
-- delivery) or proving (a redelivery: the previous run of this message died).  Both count a
-- delivery (deliveries are summed over all attempts); past max deliveries the partition
-- and its job fail (poison pill).  A message naming another circuit than the job's is refused
-- ('mismatch': the service never sends one).  Rejections change nothing.  The same call again (same
-- nonce: its reply was lost) is accepted again with its token, counting nothing.
-- Returns {ok 0|1, token|'', reason, deliveries, the job's deadline_at|'', others routed}:
-- the last, when accepted, is how many other partitions are routed to this worker now (0: the
-- device is idle after this one, and publishes this run's finalize itself, before prove_end).
local job, idx, attempt, worker = A(1), A(2), A(3), A(4)
local j = redis.call('HMGET', KEYS[1], 'state', 'circuit')
local js = j[1]
if not js then return {0, '', 'unknown', 0, ''} end
local p = redis.call('HMGET', KEYS[2], 'state', 'attempt', 'worker', 'deliveries', 'token')
if not p[1] then return {0, '', 'unknown', 0, ''} end
if js ~= 'running' then return {0, '', 'job_' .. js, tonumber(p[4]) or 0, ''} end
if deadline_passed(job) then return {0, '', 'deadline', tonumber(p[4]) or 0, ''} end
if not blank(A(7)) and j[2] ~= A(7) then return {0, '', 'mismatch', tonumber(p[4]) or 0, ''} end
if tonumber(p[2]) ~= tonumber(attempt) or p[3] ~= worker
    or (p[1] ~= 'synth_done' and p[1] ~= 'proving') then
  return {0, '', 'stale', tonumber(p[4]) or 0, ''}
end
local token = job .. ':' .. idx .. ':' .. attempt .. ':' .. A(6)
if p[1] == 'proving' and p[5] == token then
  -- this very call again (same nonce: StateStore.send_prove_begin lost its reply): done
  -- already, so nothing is counted twice
  return {1, token, 'ok', tonumber(p[4]) or 0, redis.call('HGET', KEYS[1], 'deadline_at') or '',
    routed_besides(worker, job, idx)}
end
local deliveries = redis.call('HINCRBY', KEYS[2], 'deliveries', 1)
if deliveries > tonumber(A(5)) then
  -- this worker is executing prove_begin, so the partition's previous run (recorded token)
  -- is not in flight here: clearing with it is safe
  fail_core(job, idx, string.format(
    'partition was delivered %d times without finishing (poison pill?)', deliveries), p[5] or '')
  return {0, '', 'poison', deliveries, ''}
end
local redelivery = p[1] == 'proving'
local jf = redis.call('HMGET', KEYS[1], 'kind', 'deadline_at')
local kind = jf[1] or ''
redis.call('HSET', KEYS[2], 'state', 'proving', 'token', token, 't_prove_start', NOW_S)
redis.call('SADD', KEYS[4], worker)
redis.call('HSET', KEYS[3], 'state', 'proving', 'job', job, 'partition', idx, 'kind', kind,
  'token', token, 'since', NOW_S)
emit('prove_begin', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker, 'token', token,
  'deliveries', deliveries, 'redelivery', redelivery and 1 or 0)
return {1, token, redelivery and 'redelivered' or 'ok', deliveries, jf[2] or '',
  routed_besides(worker, job, idx)}
