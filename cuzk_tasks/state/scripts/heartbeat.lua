-- heartbeat: SET the heartbeat key with a TTL; update heartbeat fields of the worker hash.
-- Emits worker_online when the key was absent.  Touches state/job/partition/token only to
-- end a stale "proving" record (below).
-- KEYS[1] heartbeat key, KEYS[2] worker hash, KEYS[3] workers set, KEYS[4] (optional) the
-- worker's host-slot key (claim_host_slot.lua): its TTL renewed while this holder has it.
-- ARGS (named, _lib.lua): worker, ttl_ms, set_resident ('1' to set resident), resident (a
-- JSON list), slot_holder (the host-slot holder, '' without a slot), registration (the
-- worker's registration, a JSON object of strings {role, host, device, queue, gpu_name,
-- resident (a JSON list, '' = unknown)}; '' = none), holder (the process holding the worker
-- id, register_worker.lua; '' = no claim).  After them, the data (_lib.lua data_base):
-- field/value pairs for the hash (`holding`, `running`, the status's extra fields).
-- One identity, one process: when the id's heartbeat key lives and the hash names another
-- holder, that process claimed the id after this one's key lapsed (this one stalled or was
-- cut off for longer than a TTL): the beat changes nothing and returns the holder, and the
-- caller stops.  A key that lapsed is this holder's again at its next beat.
-- A worker hash without a role lost its registration (Redis restarted empty, or the worker
-- was retired while it stalled): with a registration the beat registers the worker again, as
-- register_worker.lua does but keeping whatever the hash holds (a resident set or an
-- assignment written meanwhile), and emits worker_registered.
-- A stale "proving" record (a prove_end given up in a long Redis outage, or never run): when the
-- beat reports `running` (a device worker: what its pool process proves now, '' = nothing),
-- a record of another run that began (`since`) before the previous such beat (`holding_at`)
-- is over: the worker goes idle by compare-and-delete on its token (worker_idle, reason
-- stale).  Without `running`, when the beat reports `holding` (the stage messages the worker's main process holds; a
-- prove is in it from before its prove_begin until after its prove_end) and the hash says
-- proving a run whose job:idx:attempt is not in it, although that run's prove_begin
-- (`since`) came before the previous holding beat (`holding_at`, whose snapshot this beat's
-- follows), the run is over without its prove_end having been recorded (given up in a long
-- outage, or its pool process died) -- if its partition has moved on from it (no longer in
-- proving under this token) -- and the worker goes idle, by compare-and-delete on its token
-- (worker_idle, reason stale).
-- Returns {1 when the worker came (back) online else 0, 1 when it was registered again
-- else 0, the hash's resident JSON or false, the other holder of the id or ''}.
local ARGS = named_args()
local worker, ttl_ms, id_holder = ARGS.worker, ARGS.ttl_ms, ARGS.holder
local was = redis.call('EXISTS', KEYS[1])
if not blank(id_holder) and was == 1 then
  local cur = redis.call('HGET', KEYS[2], 'holder')
  if not blank(cur) and cur ~= id_holder then return {0, 0, false, cur} end
end
local registered = 0
if ARGS.registration ~= '' and redis.call('HEXISTS', KEYS[2], 'role') == 0 then
  local r = cjson.decode(ARGS.registration)
  redis.call('HSET', KEYS[2], 'role', r.role, 'host', r.host, 'device', r.device,
    'queue', r.queue, 'registered_at', NOW_S)
  redis.call('HSETNX', KEYS[2], 'gpu_name', r.gpu_name)  -- the pool process may know it
  redis.call('HSETNX', KEYS[2], 'state', 'idle')
  redis.call('HSETNX', KEYS[2], 'since', NOW_S)
  if r.resident ~= '' then redis.call('HSETNX', KEYS[2], 'resident', r.resident) end
  emit('worker_registered', 'worker', worker, 'role', r.role, 'host', r.host, 'queue', r.queue)
  registered = 1
end
redis.call('SET', KEYS[1], NOW_S, 'PX', ttl_ms)
redis.call('SADD', KEYS[3], worker)
redis.call('HSET', KEYS[2], 'last_hb', NOW_S, 'hb_ttl_ms', ttl_ms)
if not blank(id_holder) then redis.call('HSET', KEYS[2], 'holder', id_holder) end
if ARGS.set_resident == '1' then redis.call('HSET', KEYS[2], 'resident', ARGS.resident) end
if KEYS[4] then
  local holder = redis.call('GET', KEYS[4])
  -- never take over a slot another process claimed after this one's key lapsed
  if not holder or holder == ARGS.slot_holder then
    redis.call('SET', KEYS[4], ARGS.slot_holder, 'PX', ttl_ms)
  end
end
local holding, running = nil, nil
local i = data_base() + 1
while A(i) ~= nil do
  if A(i) == 'holding' then holding = A(i + 1) end
  if A(i) == 'running' then running = A(i + 1) end
  redis.call('HSET', KEYS[2], A(i), A(i + 1))
  i = i + 2
end
if running then
  -- a device worker's main process reports what its pool process runs (RunSlot, set before
  -- prove_begin and cleared after prove_end): a proving record of another run that began before
  -- the previous such beat (whose read this beat's follows) is over
  local w = redis.call('HMGET', KEYS[2], 'state', 'token', 'since', 'holding_at')
  if w[1] == 'proving' and not blank(w[2]) and tonumber(w[3]) and tonumber(w[4])
      and tonumber(w[3]) < tonumber(w[4]) then
    local run = string.match(w[2], '^(.*):[^:]*$')  -- job:idx:attempt of job:idx:attempt:nonce
    if run and run ~= running then clear_worker_if(worker, w[2], 'stale') end
  end
  redis.call('HSET', KEYS[2], 'holding_at', NOW_S)
elseif holding then
  local w = redis.call('HMGET', KEYS[2], 'state', 'token', 'since', 'holding_at')
  if w[1] == 'proving' and not blank(w[2]) and tonumber(w[3]) and tonumber(w[4])
      and tonumber(w[3]) < tonumber(w[4]) then
    local run = string.match(w[2], '^(.*):[^:]*$')  -- job:idx:attempt of job:idx:attempt:nonce
    local held = false
    for _, m in ipairs(cjson.decode(holding)) do
      if m == run then held = true end
    end
    -- and only a run its partition has moved on from: while the partition is in proving under
    -- this token the run may still be live (its acceptance not yet seen by a main process
    -- that is busy reconnecting); a run that is really gone there is the sweeper's stage
    -- lease's to end (recover_stage clears the worker by the same compare-and-delete)
    local job, idx = string.match(w[2], '^([^:]*):([^:]*):')
    local current = false
    if job and idx then
      local p = redis.call('HMGET', K.part(job, idx), 'state', 'token')
      current = p[1] == 'proving' and p[2] == w[2]
    end
    if run and not held and not current then clear_worker_if(worker, w[2], 'stale') end
  end
  redis.call('HSET', KEYS[2], 'holding_at', NOW_S)
end
if was == 0 then emit('worker_online', 'worker', worker) end
return {1 - was, registered, redis.call('HGET', KEYS[2], 'resident'), ''}
