-- worker_offline: delete the heartbeat key (what expiry does); the stored state stays.
-- KEYS[1] heartbeat key.  A(1) worker.  Returns 1 if the worker was online.
local n = redis.call('DEL', KEYS[1])
if n == 1 then emit('worker_offline', 'worker', A(1)) end
return n
