-- create_job: a job of at most CHUNK partitions and its partitions, in one step;
-- idempotent on request_id.  (A bigger job: create_parts.lua steps, then create_commit.lua.)
-- KEYS[1] job hash, KEYS[2] request key ('' when no request id; built by keys.py either way)
-- ARGS (named, _lib.lua): job, circuit, kind, priority, request (id, '' = none),
-- n (partitions), n_messages (m: 0 or n), release ('1' when m > 0), window (how many are
-- sent now, 0 = all; the rest are held and released one per finished partition: _lib.lua
-- release_held), on_done (the spec, JSON {"task", "queue"}, '' = none) and on_done_message
-- (its outbox entry without kwargs, kept under K.on_done(job) until the job ends:
-- send_on_done), deadline_s (seconds from now, '' = none: deadline_s and deadline_at on
-- the job, K.jobs_deadlines()), digest (the request's, '' = none: kept on the job as
-- request_digest, _lib.lua request_job).
-- After them, the data (_lib.lua data_base): per partition 3 args (input, input_ref,
-- witness_ref), then the m outbox entries (cuzk_tasks/service/messages.py), in partition
-- order -- sent only when the job is created, so the job and its first tasks appear
-- together.  Partition keys are built from the prefix.  Returns {job_id, created 0|1}, or
-- {job_id, -2}: the request id names a job of other content (nothing is created), or
-- {job_id, -3, eta_s, partitions ahead, devices}: its deadline_s is shorter than its
-- estimate allows (_lib.lua estimate, misses; nothing is created).  A created job keeps its ETA.
local ARGS = named_args()
local job, req, n = ARGS.job, ARGS.request, tonumber(ARGS.n)
if req ~= '' then
  local existing = request_job(KEYS[2], ARGS.digest)
  if existing then return existing end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {job, 0} end
local eta_ms, ahead, devices = estimate(ARGS.circuit, ARGS.priority, n, NOW, job)
if misses(eta_ms, ARGS.deadline_s) then
  return {job, -3, string.format('%.3f', eta_ms / 1000), ahead, devices}
end
begin_job(job, ARGS.circuit, ARGS.kind, ARGS.priority, req, n, 'creating')
keep_request_digest(KEYS[1], req, ARGS.digest)
local data = data_base()
write_partitions(job, 0, n, data)
local m = tonumber(ARGS.n_messages)
hold_messages(job, data + 3 * n, m)
activate_job(job, req, m > 0 and ARGS.release or '', ARGS.window, ARGS.on_done,
  ARGS.on_done_message, ARGS.deadline_s)
record_eta(job, eta_ms, ahead, devices)
return {job, 1}
