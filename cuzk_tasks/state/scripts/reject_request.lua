-- reject_request: a worker refused a message before running it (too deep, too big, a field
-- of the wrong type: cuzk_tasks/service/safe_request.py).  Recorded for the operator: one entry on
-- K.rejected() (newest first, capped at A(5)), the counter requests_rejected:<task>, an event.
-- No KEYS.  A(1) task name, A(2) task id, A(3) reason, A(4) worker, A(5) entries kept.
local task, id, reason, worker, kept = A(1), A(2), A(3), A(4), tonumber(A(5))
redis.call('LPUSH', K.rejected(), cjson.encode({task = task, task_id = id, reason = reason,
  worker = worker, at = NOW_S}))
if kept and kept > 0 then redis.call('LTRIM', K.rejected(), 0, kept - 1) end
redis.call('HINCRBY', K.counters(), 'requests_rejected:' .. task, 1)
emit('request_rejected', 'task', task, 'task_id', id, 'worker', worker, 'error', reason)
return 1
