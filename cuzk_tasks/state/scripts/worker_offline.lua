-- worker_offline: delete the heartbeat key (what expiry does); the stored state stays.  With
-- a host slot, release it too -- compare-and-delete: only while this worker still holds it.
-- With a holder (register_worker.lua), the heartbeat key is deleted only while the hash
-- names this holder: never the key of a process that took the id over (or of one that
-- claimed none, whose id a refused newcomer must leave alone).
-- KEYS[1] heartbeat key, KEYS[2] worker hash, KEYS[3] (optional) host-slot key.
-- A(1) worker, A(2) host-slot holder ('' without a slot), A(3) the id's holder ('' = any).
-- Returns 1 if the worker was online (and is now offline).
if KEYS[3] and redis.call('GET', KEYS[3]) == A(2) then redis.call('DEL', KEYS[3]) end
if not blank(A(3)) then
  local cur = redis.call('HGET', KEYS[2], 'holder')
  if cur ~= A(3) then return 0 end
end
local n = redis.call('DEL', KEYS[1])
if n == 1 then emit('worker_offline', 'worker', A(1)) end
return n
