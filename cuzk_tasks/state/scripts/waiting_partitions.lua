-- waiting_partitions (read): the partitions of live jobs that wait for a stage message --
-- pending (synthesize), synth_done and routed (prove_start on its device's queue),
-- finalizing (finalize) -- as JSON [[job, idx, state, attempt, worker], ...], at most A(1).
-- The sweeper looks for lost messages among them (Sweeper.recover_lost_messages).
-- KEYS[1] jobs:active.
local out = {}
local limit = tonumber(A(1))
for _, job in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local j = redis.call('HMGET', K.job(job), 'state', 'n_partitions')
  if JOB_LIVE[j[1]] then
    for i = 0, tonumber(j[2] or '0') - 1 do
      local p = redis.call('HMGET', K.part(job, i), 'state', 'attempt', 'worker')
      if p[1] == 'pending' or p[1] == 'finalizing' or (p[1] == 'synth_done' and not blank(p[3])) then
        out[#out + 1] = {job, i, p[1], tonumber(p[2]) or 0, p[3] or ''}
        if #out >= limit then return cjson.encode(out) end
      end
    end
  end
end
return cjson.encode(out)
