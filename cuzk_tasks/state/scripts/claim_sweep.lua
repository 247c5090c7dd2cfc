-- claim_sweep: one sweeper at a time does the cluster-wide checks (re-dispatch, stage and
-- request leases, routing, the outbox, deadlines, reaping, retiring): the caller takes the
-- key when it is free or already its own, for A(2) ms.  The holder renews it with every
-- sweep; another CPU worker's sweeper takes over once a dead holder's key lapses.
-- KEYS[1] the sweeper key.  A(1) the caller (its worker id), A(2) ttl ms.
-- Returns 1 when the caller holds it (now), 0 when another does.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= A(1) then return 0 end
redis.call('SET', KEYS[1], A(1), 'PX', A(2))
if not holder then emit('sweeper', 'worker', A(1)) end
return 1
