-- expire_deadlines: every live job whose deadline has passed fails ("deadline exceeded
-- (...)"), its live partitions cancelled (_lib.lua deadline_passed) -- so no worker spends
-- time on them, even those no message reaches any more.  The sweeper runs it every interval.
-- KEYS[1] jobs:deadlines (zset job -> deadline_at).  Returns the ids failed.
local failed = {}
for _, job in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', NOW_S)) do
  local js = redis.call('HGET', K.job(job), 'state')
  if js and JOB_LIVE[js] then
    deadline_passed(job)
    failed[#failed + 1] = job
  else
    redis.call('ZREM', KEYS[1], job)  -- ended otherwise (or expired)
  end
end
return failed
