-- reap_jobs: one step of finishing the jobs of more than CHUNK partitions, which
-- finalize_end (every partition done: 'completing'), finish_job and terminate_partitions only
-- marked (_lib.lua mark_for_reaper).  A completing job first gets its result written, CHUNK
-- partitions per step, and ends (done, on_done) in the step that stores it.  An ended one: its live
-- partitions -> the job's reap_state (cancelled) with reap_error, out of routed/unrouted,
-- and every key given the job retention TTL -- at most CHUNK partitions per step, the
-- oldest marked job first.  Meanwhile the job's own state (terminal) already stops its
-- partitions: every transition checks it first.  One event per step ('partitions_ended',
-- naming the job and the range) instead of one per partition.
-- KEYS[1] jobs:reaping.  Returns the number of jobs still marked (0: all reaped).
local budget = CHUNK
while budget > 0 do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  local job = head[1]
  if not job then break end
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'n_partitions', 'reap_next', 'reap_state', 'reap_error',
    'reap_except', 'request_id', 'completing', 'result_next', 'state', 'result_ttl', 'circuit',
    'kind')
  if not j[1] then
    redis.call('ZREM', KEYS[1], job)  -- gone (expired): nothing left to do
  elseif j[7] == '1' then
    -- every partition is done (finalize_end): the result, CHUNK partitions per step, under
    -- K.result_building until whole, then renamed to K.result in the step that ends the job
    local building = K.result_building(job)
    if j[9] ~= 'running' then
      -- ended otherwise meanwhile (cancelled): that end marked it for the pass below
      redis.call('DEL', building)
      redis.call('HDEL', jkey, 'completing', 'result_next', 'result_ttl')
    else
      local n, from = tonumber(j[1]), tonumber(j[8]) or 0
      local to = math.min(n, from + budget)
      local items = {}
      if from == 0 then
        redis.call('DEL', building)
        items[1] = '{"job_id": ' .. cjson.encode(job) .. ', "circuit": ' .. json_str(j[11])
          .. ', "kind": ' .. json_str(j[12]) .. ', "state": "done", "proofs": ['
      end
      for i = from, to - 1 do
        local p = redis.call('HMGET', K.part(job, i), 'proof', 'public')
        items[#items + 1] = (i > 0 and ', ' or '') .. '{"idx": ' .. i .. ', "proof": '
          .. (blank(p[1]) and 'null' or p[1]) .. ', "public": '
          .. (blank(p[2]) and 'null' or p[2]) .. '}'
      end
      if to >= n then items[#items + 1] = ']}' end
      redis.call('APPEND', building, table.concat(items))
      budget = budget - (to - from)
      if to < n then
        redis.call('HSET', jkey, 'result_next', to)
      else
        redis.call('RENAME', building, K.result(job))
        local ttl = tonumber(j[10])
        if ttl and ttl > 0 then redis.call('EXPIRE', K.result(job), math.floor(ttl)) end
        redis.call('HDEL', jkey, 'completing', 'result_next', 'result_ttl')
        finish_job(job, 'done', '', nil)  -- marks it again, for the pass below
      end
    end
  elseif blank(j[3]) and not (RETENTION_S and RETENTION_S > 0) then
    -- nothing to end and no retention to set (a done job, job_retention_s 0)
    redis.call('HDEL', jkey, 'reap_next')
    redis.call('ZREM', KEYS[1], job)
  else
    local n, from = tonumber(j[1]), tonumber(j[2]) or 0
    local to = math.min(n, from + budget)
    local ttl = (RETENTION_S and RETENTION_S > 0) and math.floor(RETENTION_S) or nil
    for i = from, to - 1 do
      if not blank(j[3]) and tostring(i) ~= tostring(j[5]) then
        terminate_one(job, i, j[3], j[4], true)
      end
      if ttl then redis.call('EXPIRE', K.part(job, i), ttl) end
    end
    budget = budget - (to - from)
    if to > from then
      emit('partitions_ended', 'job', job, 'from', from, 'to', to, 'state', j[3])
    end
    if to >= n then
      redis.call('HDEL', jkey, 'reap_next', 'reap_state', 'reap_error', 'reap_except')
      if ttl then
        redis.call('EXPIRE', jkey, ttl)
        if not blank(j[6]) then redis.call('EXPIRE', K.request(j[6]), ttl) end
        redis.call('ZREMRANGEBYSCORE', K.jobs_recent(), '-inf', '(' .. tostring(NOW - RETENTION_S))
      end
      redis.call('ZREM', KEYS[1], job)
    else
      redis.call('HSET', jkey, 'reap_next', to)
    end
  end
end
return redis.call('ZCARD', KEYS[1])
