-- claim_host_slot: give a starting worker the lowest free host name <group>-<n> of its
-- group (settings.host_slot), so a recreated container gets its predecessor's worker id and
-- device queue back, and replicas get distinct ones.  A slot is free when its key is absent:
-- the key lives while the holder's heartbeat refreshes it (heartbeat.lua) and is deleted by a
-- clean stop (worker_offline.lua), so it outlives a killed holder by at most one TTL.
-- KEYS: none (slot keys are built from the group).
-- A(1) group, A(2) holder ("<container host>:<pid>"), A(3) ttl ms, A(4) number of slots.
-- Returns the slot index claimed, or -1 when every slot is held.
for i = 0, tonumber(A(4)) - 1 do
  local key = K.host_slot(A(1), i)
  if redis.call('SET', key, A(2), 'NX', 'PX', A(3)) then
    emit('host_slot_claimed', 'group', A(1), 'slot', i, 'holder', A(2))
    return i
  end
  if redis.call('GET', key) == A(2) then  -- the same process asking again
    redis.call('PEXPIRE', key, A(3))
    return i
  end
end
return -1
