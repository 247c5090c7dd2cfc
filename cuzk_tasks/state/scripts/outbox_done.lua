-- outbox_done: entries A(1) .. A(n) (their ids) were published: out of the outbox.
-- No KEYS (the outbox keys are built from the prefix).  Returns how many were still there.
local n = 0
for i = 1, own_args() do
  n = n + redis.call('HDEL', K.outbox(), A(i))
  redis.call('ZREM', K.outbox_due(), A(i))
end
return n
