-- register_worker: called when a worker PROCESS starts.  A fresh process runs nothing, so
-- the worker's assignment is reset (state idle, no job/partition/token).
-- KEYS[1] workers set, KEYS[2] worker hash, KEYS[3] heartbeat key.
-- ARGS (named, _lib.lua): worker, role, host, device, queue, gpu_name, holder ('<container
-- host>:<pid>' of the process; '' = no claim), ttl_ms.
-- With a holder this is also the claim of the worker id ("one identity, one process"):
-- while the id's heartbeat key lives and the hash names another holder (or none: a process
-- that claimed nothing), it is refused and changes nothing.  Otherwise the hash records the
-- holder and the heartbeat key is SET in the same step, so of two processes starting at
-- once with one id exactly one wins.  The same holder asking again (a container restarted
-- with the same pid) is accepted.
-- Returns {1} when registered, else {0, holder of the id ('' = unknown), its heartbeat's
-- ms left, its pid field ('' = unknown)}.
local ARGS = named_args()
local holder = ARGS.holder
local was = 1
if not blank(holder) then
  local pttl = redis.call('PTTL', KEYS[3])
  local cur = redis.call('HGET', KEYS[2], 'holder')
  if pttl ~= -2 and cur ~= holder then
    return {0, cur or '', pttl, redis.call('HGET', KEYS[2], 'pid') or ''}
  end
  was = pttl == -2 and 0 or 1
end
redis.call('SADD', KEYS[1], ARGS.worker)
redis.call('HSET', KEYS[2], 'role', ARGS.role, 'host', ARGS.host, 'device', ARGS.device,
  'queue', ARGS.queue, 'gpu_name', ARGS.gpu_name, 'state', 'idle', 'since', NOW_S,
  'registered_at', NOW_S)
redis.call('HDEL', KEYS[2], 'job', 'partition', 'kind', 'token', 'holding_at')
emit('worker_registered', 'worker', ARGS.worker, 'role', ARGS.role, 'host', ARGS.host,
  'queue', ARGS.queue)
if not blank(holder) then
  redis.call('HSET', KEYS[2], 'holder', holder)
  redis.call('SET', KEYS[3], NOW_S, 'PX', ARGS.ttl_ms)
  if was == 0 then emit('worker_online', 'worker', ARGS.worker) end
end
return {1}
