-- heartbeat: SET the heartbeat key with a TTL; update heartbeat fields of the worker hash.
-- Never touches state/job/partition/token.  Emits worker_online when the key was absent.
-- KEYS[1] heartbeat key, KEYS[2] worker hash, KEYS[3] workers set, KEYS[4] (optional) the
-- worker's host-slot key (claim_host_slot.lua): its TTL renewed while this holder has it.
-- A(1) worker, A(2) ttl ms, A(3) '1' to set resident, A(4) resident JSON list,
-- A(5) host-slot holder ('' without a slot), A(6) the worker's registration, a JSON object
-- of strings {role, host, device, queue, gpu_name, resident (a JSON list, '' = unknown)}
-- ('' = none), A(7..) extra field/value pairs.
-- A worker hash without a role lost its registration (Redis restarted empty, or the worker
-- was retired while it stalled): with A(6) the beat registers the worker again, as
-- register_worker.lua does but keeping whatever the hash holds (a resident set or an
-- assignment written meanwhile), and emits worker_registered.
-- Returns {1 when the worker came (back) online else 0, 1 when it was registered again
-- else 0, the hash's resident JSON or false}.
local was = redis.call('EXISTS', KEYS[1])
local registered = 0
if A(6) ~= '' and redis.call('HEXISTS', KEYS[2], 'role') == 0 then
  local r = cjson.decode(A(6))
  redis.call('HSET', KEYS[2], 'role', r.role, 'host', r.host, 'device', r.device,
    'queue', r.queue, 'registered_at', NOW_S)
  redis.call('HSETNX', KEYS[2], 'gpu_name', r.gpu_name)  -- the pool process may know it
  redis.call('HSETNX', KEYS[2], 'state', 'idle')
  redis.call('HSETNX', KEYS[2], 'since', NOW_S)
  if r.resident ~= '' then redis.call('HSETNX', KEYS[2], 'resident', r.resident) end
  emit('worker_registered', 'worker', A(1), 'role', r.role, 'host', r.host, 'queue', r.queue)
  registered = 1
end
redis.call('SET', KEYS[1], NOW_S, 'PX', A(2))
redis.call('SADD', KEYS[3], A(1))
redis.call('HSET', KEYS[2], 'last_hb', NOW_S, 'hb_ttl_ms', A(2))
if A(3) == '1' then redis.call('HSET', KEYS[2], 'resident', A(4)) end
if KEYS[4] then
  local holder = redis.call('GET', KEYS[4])
  -- never take over a slot another process claimed after this one's key lapsed
  if not holder or holder == A(5) then redis.call('SET', KEYS[4], A(5), 'PX', A(2)) end
end
local i = 7
while A(i) ~= nil do
  redis.call('HSET', KEYS[2], A(i), A(i + 1))
  i = i + 2
end
if was == 0 then emit('worker_online', 'worker', A(1)) end
return {1 - was, registered, redis.call('HGET', KEYS[2], 'resident')}
