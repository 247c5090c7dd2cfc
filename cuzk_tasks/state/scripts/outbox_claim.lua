-- outbox_claim: the sweeper's look at the outbox -- entries added more than A(1) seconds ago
-- are still there, so the process that added them died (or lost the broker) before it had
-- them published.  Up to A(2) of them are claimed: re-scored to now, so no other sweeper
-- publishes them within the next A(1) seconds, and returned like the entries a step adds
-- (_lib.lua outbox_reply): the store publishes them and then deletes them (outbox_done.lua).
-- No KEYS (the outbox keys are built from the prefix).  Returns how many were claimed.
local ids = redis.call('ZRANGEBYSCORE', K.outbox_due(), '-inf', NOW - tonumber(A(1)),
  'LIMIT', 0, tonumber(A(2)))
local claimed = 0
for _, id in ipairs(ids) do
  local entry = redis.call('HGET', K.outbox(), id)
  if entry then
    redis.call('ZADD', K.outbox_due(), NOW, id)
    OUTBOX_NEW[#OUTBOX_NEW + 1] = id
    OUTBOX_NEW[#OUTBOX_NEW + 1] = entry
    claimed = claimed + 1
  else
    redis.call('ZREM', K.outbox_due(), id)
  end
end
if claimed > 0 then emit('outbox_overdue', 'entries', claimed) end
return claimed
