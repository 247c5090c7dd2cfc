-- stage_partitions (read): the partitions of live jobs whose stage is due or running, so a
-- stage message and, once it runs, its stage lease should exist:
--   pending      synthesize waits on the cpu queue     synthesizing  synthesize runs
--   synth_done   (routed) prove waits on the           proving       prove runs
--                device's queue                        finalizing    finalize waits or runs
-- The sweeper re-drives the ones no live worker holds (Sweeper.recover_stages).  One step
-- looks at CHUNK partitions at most, from the job of rank A(2) in jobs:active and its
-- partition A(3) on (StateStore.stage_partitions calls it until the end): a job joining or
-- leaving jobs:active between two steps may shift the ranks, so one sweep may miss or
-- repeat a partition, which the next sweep sees (a partition is re-driven only when seen
-- unheld on two sweeps).
-- KEYS[1] jobs:active.  A(1) at most this many rows, A(2) job rank, A(3) partition index.
-- Returns JSON {rows = [[job, idx, state, attempt, worker], ...], rank, idx}: where the next
-- step starts, rank -1 when every job was looked at.
local DUE = {pending = true, synthesizing = true, proving = true, finalizing = true}
local out = {}
local limit, rank, first = tonumber(A(1)), tonumber(A(2)), tonumber(A(3))
local budget = CHUNK
while true do
  local head = redis.call('ZRANGE', KEYS[1], rank, rank)
  local job = head[1]
  if not job then return cjson.encode({rows = out, rank = -1, idx = 0}) end
  local j = redis.call('HMGET', K.job(job), 'state', 'n_partitions', 'n_released')
  local n = 0
  if JOB_LIVE[j[1]] then
    -- partitions past n_released are held (JOB_WINDOW): their message is not due yet
    n = tonumber(j[2] or '0')
    if not blank(j[3]) then n = math.min(n, tonumber(j[3])) end
  end
  local i = first
  while i < n do
    if budget <= 0 or #out >= limit then
      return cjson.encode({rows = out, rank = #out >= limit and -1 or rank, idx = i})
    end
    local p = redis.call('HMGET', K.part(job, i), 'state', 'attempt', 'worker')
    -- LEGACY: 'gpu' is the previous release's name of 'proving' (a store it wrote; the
    -- sweeper re-drives it as a lost proving, recover_stage.lua); may go after one release
    if p[1] == 'gpu' then p[1] = 'proving' end
    if DUE[p[1]] or (p[1] == 'synth_done' and not blank(p[3])) then
      out[#out + 1] = {job, i, p[1], tonumber(p[2]) or 0, p[3] or ''}
    end
    budget = budget - 1
    i = i + 1
  end
  rank, first = rank + 1, 0
end
