-- finalize_due: a device sent a lone run's prove_end before publishing the run's finalize
-- itself (pipeline/prove.py) and the broker could not take it: record the finalize (an outbox
-- entry) now, if the partition is still finalizing this run (attempt and token); else
-- nothing -- it was cancelled or re-dispatched meanwhile.
-- KEYS[1] partition hash.  A(1) attempt, A(2) token, A(3) message.
-- Returns 1 when the message was recorded, 0 otherwise.
local attempt, token = A(1), A(2)
local p = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'token')
if p[1] == 'finalizing' and tonumber(p[2]) == tonumber(attempt) and p[3] == token
    and token ~= '' then
  return outbox_add(A(3))
end
return 0
