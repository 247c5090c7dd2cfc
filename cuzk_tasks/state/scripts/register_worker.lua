-- register_worker: called when a worker process starts.  A fresh process runs nothing, so
-- the worker's assignment is reset (state idle, no job/partition/token).
-- KEYS[1] workers set, KEYS[2] worker hash.
-- A(1) worker, A(2) role, A(3) host, A(4) device, A(5) queue, A(6) gpu_name.  Returns 1.
redis.call('SADD', KEYS[1], A(1))
redis.call('HSET', KEYS[2], 'role', A(2), 'host', A(3), 'device', A(4), 'queue', A(5),
  'gpu_name', A(6), 'state', 'idle', 'since', NOW_S, 'registered_at', NOW_S)
redis.call('HDEL', KEYS[2], 'job', 'partition', 'kind', 'token')
emit('worker_registered', 'worker', A(1), 'role', A(2), 'host', A(3), 'queue', A(5))
return 1
