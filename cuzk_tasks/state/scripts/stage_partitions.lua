-- stage_partitions (read): the partitions of live jobs whose stage is due or running, so a
-- stage message and, once it runs, its stage lease should exist:
--   pending      synthesize waits on the cpu queue     synthesizing  synthesize runs
--   synth_done   (routed) prove_start waits on the     gpu           prove_start runs
--                device's queue                        finalizing    finalize waits or runs
-- as JSON [[job, idx, state, attempt, worker], ...], at most A(1).  The sweeper re-drives the
-- ones no live worker holds (Sweeper.recover_stages).
-- KEYS[1] jobs:active.
local DUE = {pending = true, synthesizing = true, gpu = true, finalizing = true}
local out = {}
local limit = tonumber(A(1))
for _, job in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local j = redis.call('HMGET', K.job(job), 'state', 'n_partitions', 'n_released')
  if JOB_LIVE[j[1]] then
    -- partitions past n_released are held (JOB_WINDOW): their message is not due yet
    local n = tonumber(j[2] or '0')
    if not blank(j[3]) then n = math.min(n, tonumber(j[3])) end
    for i = 0, n - 1 do
      local p = redis.call('HMGET', K.part(job, i), 'state', 'attempt', 'worker')
      if DUE[p[1]] or (p[1] == 'synth_done' and not blank(p[3])) then
        out[#out + 1] = {job, i, p[1], tonumber(p[2]) or 0, p[3] or ''}
        if #out >= limit then return cjson.encode(out) end
      end
    end
  end
end
return cjson.encode(out)
