-- create_job: a job of at most CHUNK partitions and its partitions, in one step;
-- idempotent on request_id.  (A bigger job: create_parts.lua steps, then create_commit.lua.)
-- KEYS[1] job hash, KEYS[2] request key ('' when no request id; built by keys.py either way)
-- A(1) job id, A(2) circuit, A(3) kind, A(4) priority, A(5) request id ('' = none),
-- A(6) n partitions, then per partition 3 args: input, input_ref, witness_ref; then the
-- number of messages m (0 or n), '1' when m > 0, the window (how many are sent now, 0 =
-- all; the rest are held and released one per finished partition: _lib.lua release_held),
-- then the m outbox entries (cuzk_tasks/service/messages.py), in partition order -- sent only when
-- the job is created, so the job and its first tasks appear together; then the on_done
-- spec (JSON {"task", "queue"}, '' = none) and its outbox entry without kwargs (kept under
-- K.on_done(job) until the job ends: send_on_done); then the deadline in
-- seconds from now ('' = none): deadline_s and deadline_at on the job, K.jobs_deadlines().
-- The LAST argument, wherever the ones above end: the request's digest ('' = none), kept on
-- the job as request_digest (_lib.lua request_job).  Partition keys are built from the
-- prefix.  Returns {job_id, created 0|1}, or {job_id, -2}: the request id names a job of
-- other content (nothing is created).
local job, circuit, kind, prio, req, n = A(1), A(2), A(3), A(4), A(5), tonumber(A(6))
if req ~= '' then
  local existing = request_job(KEYS[2])
  if existing then return existing end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {job, 0} end
begin_job(job, circuit, kind, prio, req, n, 'creating')
keep_request_digest(KEYS[1], req)
write_partitions(job, 0, n, 6)
local mbase = 6 + 3 * n
local m = tonumber(A(mbase + 1) or '0')
hold_messages(job, mbase + 3, m)
local ondone = mbase + 3 + m + 1
activate_job(job, req, m > 0 and A(mbase + 2) or '', A(mbase + 3), A(ondone), A(ondone + 1),
  A(ondone + 2))
return {job, 1}
