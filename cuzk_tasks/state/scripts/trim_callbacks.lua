-- trim_callbacks: drop expired callback messages no consumer took.  An on_done callback
-- carries a Celery `expires` (send time + ON_DONE_TTL_S, send_on_done); a Celery worker
-- would discard it after that, so once expired it only takes space.  For each list in
-- K.on_done_queues(): pop from its oldest end (consumers BRPOP there too; LPUSH adds at the
-- other) while the oldest message's `expires` is an ISO 8601 UTC time in the past -- any
-- message, ours or another sender's, is dead by then -- and stop at the first that is not
-- (never past a live one: the list may be shared).  A list whose newest callback has
-- expired leaves K.on_done_queues() once trimmed -- unless its oldest message still waits
-- for its own `expires`: Celery counts that from the send, which can come later than the
-- step that scored the list (the sweeper sends what a dead process left in the outbox,
-- OUTBOX_GRACE_S or a broker outage later), so the list stays watched until that one
-- expires too.  No KEYS (the lists come from the set).
-- A(1) most messages dropped per call.  Returns the number dropped.
local budget = tonumber(A(1))
local now_iso = iso_utc(NOW)
local dropped = 0
for _, list in ipairs(redis.call('ZRANGE', K.on_done_queues(), 0, -1)) do
  local kind = redis.call('TYPE', list)
  if type(kind) == 'table' then kind = kind.ok end
  local done = kind ~= 'list'
  local waiting = false  -- the oldest message has an expires still to come
  while not done and dropped < budget do
    local raw = redis.call('LINDEX', list, -1)
    local expires
    if raw then
      local ok, env = pcall(cjson.decode, raw)
      if ok and type(env) == 'table' and type(env.headers) == 'table' then
        expires = env.headers.expires
      end
    end
    -- only UTC times compare as text ('+00:00'; fractions sort after the whole second)
    if type(expires) == 'string' and string.find(expires, '^%d%d%d%d%-%d%d%-%d%dT')
        and string.sub(expires, -6) == '+00:00' then
      if expires < now_iso then
        redis.call('RPOP', list)
        dropped = dropped + 1
      else
        waiting, done = true, true
      end
    else
      done = true
    end
  end
  -- every callback sent there has expired and none is left to drop: stop looking at it
  if done and not waiting
      and tonumber(redis.call('ZSCORE', K.on_done_queues(), list) or '0') <= NOW then
    redis.call('ZREM', K.on_done_queues(), list)
  end
end
if dropped > 0 then emit('callbacks_expired', 'dropped', dropped) end
return dropped
