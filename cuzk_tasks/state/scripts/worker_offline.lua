-- worker_offline: delete the heartbeat key (what expiry does); the stored state stays.  With
-- a host slot, release it too -- compare-and-delete: only while this worker still holds it.
-- KEYS[1] heartbeat key, KEYS[2] (optional) host-slot key.
-- A(1) worker, A(2) host-slot holder ('' without a slot).  Returns 1 if the worker was online.
local n = redis.call('DEL', KEYS[1])
if KEYS[2] and redis.call('GET', KEYS[2]) == A(2) then redis.call('DEL', KEYS[2]) end
if n == 1 then emit('worker_offline', 'worker', A(1)) end
return n
