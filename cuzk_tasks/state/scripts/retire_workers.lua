-- retire_workers: forget workers that have been offline (no heartbeat key) for longer than
-- the retirement age, so a recreated container or a removed host leaves no ghost on the
-- status page, in /metrics or in the alerts.  Offline since: the later of the last heartbeat
-- and the registration (a process re-registering an old id has not beaten yet: its
-- predecessor's last heartbeat must not make it look long gone).  A worker that still has
-- partitions routed to it is kept:
-- the sweeper re-dispatches those first.
-- KEYS[1] workers set.  A(1) retirement age in seconds (> 0).
-- Returns the ids retired.
local retired = {}
local age = tonumber(A(1))
for _, w in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', K.hb(w)) == 0 and redis.call('SCARD', K.routed(w)) == 0 then
    local seen = redis.call('HMGET', K.worker(w), 'last_hb', 'registered_at')
    local since = math.max(tonumber(seen[1] or '') or 0, tonumber(seen[2] or '') or 0)
    if NOW - since > age then
      redis.call('SREM', KEYS[1], w)
      redis.call('DEL', K.worker(w), K.routed(w))
      emit('worker_retired', 'worker', w, 'offline_s', string.format('%.0f', NOW - since))
      retired[#retired + 1] = w
    end
  end
end
return retired
