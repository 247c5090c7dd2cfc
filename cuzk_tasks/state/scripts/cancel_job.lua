-- cancel_job: a live job -> cancelled, its live partitions -> cancelled (out of
-- routed/unrouted).  Workers are untouched: a run in flight ends with its own prove_end.
-- KEYS[1] job hash; partition keys are built from the prefix.  A(1) job, A(2) reason.
-- Returns {ok 0|1, reason}.
local js = redis.call('HGET', KEYS[1], 'state')
if not js then return {0, 'unknown'} end
if not JOB_LIVE[js] then return {0, 'job_' .. js} end
finish_job(A(1), 'cancelled', A(2))
terminate_partitions(A(1), -1, 'cancelled', A(2))
return {1, 'ok'}
