-- reap_creating: one step of deleting the creations of big jobs (create_parts.lua) that
-- began more than A(1) seconds ago and never committed -- their submitter died -- or that
-- create_commit.lua discarded (score 0): marked 'discard' (so a late create_parts or
-- create_commit of it is rejected), then its partitions deleted CHUNK per step, then its
-- job hash and held messages.  Such a job was never visible, so no event is written.
-- KEYS[1] jobs:creating.  A(1) age in seconds.  Returns the number of such creations left.
local cutoff = NOW - tonumber(A(1))
local budget = CHUNK
while budget > 0 do
  local head = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(cutoff), 'LIMIT', 0, 1)
  local job = head[1]
  if not job then break end
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'state', 'n_written')
  if j[1] ~= 'creating' then
    redis.call('ZREM', KEYS[1], job)  -- committed meanwhile (or gone): not ours to delete
  else
    redis.call('HSET', jkey, 'discard', 1)
    local w = tonumber(j[2]) or 0
    local from = math.max(0, w - budget)
    for i = from, w - 1 do redis.call('DEL', K.part(job, i)) end
    budget = budget - (w - from)
    if from == 0 then
      redis.call('DEL', jkey, K.held(job))
      redis.call('ZREM', KEYS[1], job)
    else
      redis.call('HSET', jkey, 'n_written', from)
    end
  end
end
return #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(cutoff), 'LIMIT', 0, 1000)
