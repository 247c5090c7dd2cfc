-- workers (read): every registered worker with its heartbeat and routed count, as JSON.
-- KEYS[1] workers set; per-worker keys are built from the prefix.
local out = {}
for _, w in ipairs(redis.call('SMEMBERS', KEYS[1])) do out[#out + 1] = worker_record(w) end
return cjson.encode(out)
