-- route: a synth_done partition of this attempt, not yet routed, goes to one device worker
-- (A(4), or when '' the best live device: _lib.lua choose_device), and its prove_start
-- message (A(6), an outbox entry without its queue; '' = none) is added to the outbox for
-- that worker's queue in the same step.  Exactly one route per attempt succeeds.
-- KEYS[1] job hash, KEYS[2] partition hash, KEYS[3] unrouted set (the worker's routed set
-- and queue list are built from what the script reads).
-- A(1) job, A(2) idx, A(3) attempt, A(4) worker or '', A(5) circuit.
-- Returns {ok 0|1, reason, worker, queue}.
return route_core(A(1), A(2), A(3), A(4), A(5), A(6))
