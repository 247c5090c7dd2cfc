-- _lib.lua: shared prelude, prepended by store.py to every script in this folder.
--
-- Calling convention of every script:
--   ARGV[1] prefix            (keys a script discovers while it runs are built from it, below)
--   ARGV[2] events maxlen     (XADD MAXLEN ~)
--   ARGV[3] recent jobs kept  ARGV[4] failures kept  ARGV[5] completions kept (s)
--   ARGV[6] job retention (s; 0 = for ever): a finished job's keys expire this long after
--   ARGV[7] chunk: the most partitions a step whose work grows with a job's size handles
--           (defaults.STATE_CHUNK): a bigger job is created, ended and reaped in steps
--   ARGV[8] '1': host-affine stages (a partition is placed on a device while pending, and
--           its synthesize and finalize run on that device's host; defaults.SHARED_SPOOL),
--           '0': any CPU worker runs any partition's (one spool every host sees)
--   ARGV[9] '1': the caller hands the outbox entries its step adds to a relay (a device's
--           pool process: StateStore(relay=True)), '0': it publishes them itself
--   ARGV[10...] the script's own arguments: A(1), A(2), ...; a script with a long argument
--           list takes them by name instead (ARGS, below)
--   KEYS: the keys named by the call's arguments (job, partition, worker, ...), as each
--   script's header says.
-- The key functions below mirror cuzk_tasks/state/keys.py (checked by a test).
local P = ARGV[1]
local EVENTS_MAXLEN = ARGV[2]
local RECENT_KEPT = tonumber(ARGV[3])
local FAILURES_KEPT = tonumber(ARGV[4])
local COMPLETIONS_KEPT_S = tonumber(ARGV[5])
local RETENTION_S = tonumber(ARGV[6])
local CHUNK = tonumber(ARGV[7])
local HOST_AFFINE = ARGV[8] == '1'
local RELAY = ARGV[9] == '1'
local COMMON_ARGS = 9  -- ARGV[1..9] above; a script's own arguments follow
local function A(n) return ARGV[COMMON_ARGS + n] end
-- how many arguments of its own the script was given
local function own_args() return #ARGV - COMMON_ARGS end
-- The named arguments of a script whose list would be long (more than 6): A(1) is how many
-- names k, A(2) .. A(2k + 1) the name/value pairs (StateStore._run given a dict), every
-- value the text a positional argument would be ('' = none); A(2k + 2) on, the script's
-- data, if any (data_base, below).  Such a script begins `local ARGS = named_args()` and
-- reads ARGS.name; a name the caller did not send is an error, not nil (a contract broken on
-- either side fails loudly).
local function named_args()
  local t = {}
  for i = 1, tonumber(A(1)) do t[A(2 * i)] = A(2 * i + 1) end
  return setmetatable(t, {__index = function(_, name)
    error('script argument ' .. tostring(name) .. ' not given')
  end})
end
-- where the data of a script with named arguments begins: DATA + n is its n-th (A(DATA + n))
local function data_base() return 1 + 2 * tonumber(A(1)) end

local K = {}
function K.job(j) return P .. ':job:' .. j end
function K.part(j, i) return P .. ':part:' .. j .. ':' .. i end
function K.jobs_active() return P .. ':jobs:active' end
function K.jobs_recent() return P .. ':jobs:recent' end
function K.jobs_deadlines() return P .. ':jobs:deadlines' end
function K.request(r) return P .. ':request:' .. r end
function K.result(j) return P .. ':result:' .. j end
function K.workers() return P .. ':workers' end
function K.worker(w) return P .. ':worker:' .. w end
function K.hb(w) return P .. ':hb:' .. w end
function K.host_slot(g, i) return P .. ':slot:' .. g .. ':' .. i end
function K.routed(w) return P .. ':routed:' .. w end
function K.unrouted() return P .. ':unrouted' end
function K.counters() return P .. ':counters' end
function K.completions() return P .. ':completions' end
function K.failures() return P .. ':failures' end
function K.rejected() return P .. ':rejected' end
function K.events() return P .. ':events' end
function K.on_done(j) return P .. ':on_done:' .. j end
function K.on_done_queues() return P .. ':on_done_queues' end
function K.histograms() return P .. ':histograms' end
function K.held(j) return P .. ':held:' .. j end
function K.jobs_creating() return P .. ':jobs:creating' end
function K.jobs_reaping() return P .. ':jobs:reaping' end
function K.result_building(j) return P .. ':result_building:' .. j end
function K.outbox() return P .. ':outbox' end
function K.outbox_due() return P .. ':outbox:due' end
function K.outbox_seq() return P .. ':outbox:seq' end
function K.outbox_relay() return P .. ':outbox:relay' end
function K.estimates(c) return P .. ':estimates:' .. c end
function K.eta_errors() return P .. ':eta_errors' end

local function member(j, i) return j .. ':' .. i end

-- one clock reading per script run: NOW_S (exact text "sec.usec") and NOW (number)
local NOW_S, NOW
do
  local t = redis.call('TIME')
  NOW_S = t[1] .. '.' .. string.rep('0', 6 - #t[2]) .. t[2]
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function blank(v) return v == nil or v == false or v == '' end

local PART_LIVE = {pending = true, synthesizing = true, synth_done = true, proving = true, finalizing = true}
local JOB_LIVE = {pending = true, running = true}

local function hgetall(key)
  local flat = redis.call('HGETALL', key)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- XADD one event: emit('type', k1, v1, k2, v2, ...); nil values become ''
local function emit(kind, ...)
  local args = {'XADD', K.events(), 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'type', kind, 'at', NOW_S}
  local kv = {...}
  for i = 1, select('#', ...) do
    local v = kv[i]
    if v == nil or v == false then v = '' end
    args[#args + 1] = tostring(v)
  end
  redis.call(unpack(args))
end

-- The outbox (docs/architecture.md, "The outbox"): a step that makes a stage due -- or
-- ends a job with an on_done callback -- records the message as an entry (JSON {"task",
-- "queue", "priority", "args", "kwargs"[, "expires_s"]}, cuzk_tasks/service/messages.py) in the
-- same step.  The entries a call adds are returned to its caller with its reply
-- (outbox_reply, below), who has Celery publish them and then deletes them; K.outbox_due()
-- scores each by when it was added, so the sweeper publishes the ones a caller that died
-- left behind (outbox_claim.lua).  `entry` blank: nothing (the step sends no message).
local OUTBOX_NEW = {}
local function outbox_add(entry)
  if blank(entry) then return 0 end
  local id = tostring(redis.call('INCR', K.outbox_seq()))
  redis.call('HSET', K.outbox(), id, entry)
  redis.call('ZADD', K.outbox_due(), NOW, id)
  OUTBOX_NEW[#OUTBOX_NEW + 1] = id
  OUTBOX_NEW[#OUTBOX_NEW + 1] = entry
  return 1
end

-- A script's reply, with the outbox entries it added: `reply` itself when it added none,
-- else {OUTBOX_MARK, n, id 1, entry 1, ..., id n, entry n, reply} (reply last: a nil reply
-- just ends the array).  store.py unwraps it (StateStore._run).  With RELAY the entries go
-- on the relay list instead, in this step -- one item "id NOW_S entry" each, LPUSHed in
-- order -- and `reply` is returned alone: a device's pool process spends no round trip on
-- them; a CPU worker's relay thread takes them (StateStore.take_relayed).
local OUTBOX_MARK = '\0outbox'
local function outbox_reply(reply)
  if #OUTBOX_NEW == 0 then return reply end
  if RELAY then
    for i = 1, #OUTBOX_NEW, 2 do
      redis.call('LPUSH', K.outbox_relay(), OUTBOX_NEW[i] .. ' ' .. NOW_S .. ' ' .. OUTBOX_NEW[i + 1])
    end
    return reply
  end
  local out = {OUTBOX_MARK, #OUTBOX_NEW / 2}
  for i = 1, #OUTBOX_NEW do out[#out + 1] = OUTBOX_NEW[i] end
  out[#out + 1] = reply
  return out
end

-- how many partitions other than job:idx are routed to worker (its queue's backlog)
local function routed_besides(worker, job, idx)
  local key = K.routed(worker)
  return redis.call('SCARD', key) - redis.call('SISMEMBER', key, member(job, idx))
end

-- THE compare-and-delete: a worker goes idle only if it still holds exactly this token.
-- `reason` (optional) rides on the worker_idle event: why not its run's own end.
local function clear_worker_if(worker, token, reason)
  if blank(worker) or blank(token) then return 0 end
  local wkey = K.worker(worker)
  if redis.call('HGET', wkey, 'token') ~= token then return 0 end
  redis.call('HSET', wkey, 'state', 'idle', 'since', NOW_S)
  redis.call('HDEL', wkey, 'job', 'partition', 'kind', 'token')
  if blank(reason) then
    emit('worker_idle', 'worker', worker, 'token', token)
  else
    emit('worker_idle', 'worker', worker, 'token', token, 'reason', reason)
  end
  return 1
end

-- take a partition out of the routed/unrouted index sets
local function unindex(job, idx, worker)
  local m = member(job, idx)
  redis.call('SREM', K.unrouted(), m)
  if not blank(worker) then redis.call('SREM', K.routed(worker), m) end
end

-- a routed partition goes back to `state` (default synth_done) with attempt `next_attempt`,
-- unrouted: off its worker's routed set, worker/token cleared from the PARTITION (never from
-- the worker hash), into the unrouted set, where it is routed (or placed) again
local function back_to_unrouted(job, idx, worker, next_attempt, state)
  local m = member(job, idx)
  if not blank(worker) then redis.call('SREM', K.routed(worker), m) end
  redis.call('HSET', K.part(job, idx), 'state', state or 'synth_done', 'attempt', next_attempt,
    'worker', '', 'token', '', 't_redispatched', NOW_S)
  redis.call('SADD', K.unrouted(), m)
end

-- a JSON string, or null for a blank value
local function json_str(v)
  if blank(v) then return 'null' end
  return cjson.encode(v)
end

-- A finished job's result as StateStore.collect_result returns it -- {"job_id", "circuit",
-- "kind", "state", "proofs": [{"idx", "proof", "public"}, ...]} in partition order -- SET
-- under K.result(job) (with a TTL of `ttl_s` seconds when > 0).  The partitions' proof and
-- public fields are JSON text already: copied in, not re-encoded.  Returns the proofs list
-- as JSON text.
local function store_result(job, state, ttl_s)
  local j = redis.call('HMGET', K.job(job), 'circuit', 'kind', 'n_partitions')
  local items = {}
  for i = 0, tonumber(j[3] or '0') - 1 do
    local p = redis.call('HMGET', K.part(job, i), 'proof', 'public')
    items[#items + 1] = '{"idx": ' .. i .. ', "proof": ' .. (blank(p[1]) and 'null' or p[1])
      .. ', "public": ' .. (blank(p[2]) and 'null' or p[2]) .. '}'
  end
  local proofs = '[' .. table.concat(items, ', ') .. ']'
  local result = '{"job_id": ' .. cjson.encode(job) .. ', "circuit": ' .. json_str(j[1])
    .. ', "kind": ' .. json_str(j[2]) .. ', "state": ' .. cjson.encode(state)
    .. ', "proofs": ' .. proofs .. '}'
  if tonumber(ttl_s) and tonumber(ttl_s) > 0 then
    redis.call('SET', K.result(job), result, 'EX', math.floor(tonumber(ttl_s)))
  else
    redis.call('SET', K.result(job), result)
  end
  return proofs
end

-- Unix time `t` as ISO 8601 in UTC, whole seconds ('2026-12-03T08:15:00+00:00'), to compare
-- with a Celery message's `expires` (trim_callbacks; Redis's Lua has no os.date).  Days to
-- a civil date: H. Hinnant's days_from_civil, inverted.
local function iso_utc(t)
  t = math.floor(t)
  local days = math.floor(t / 86400)
  local rem = t - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d+00:00', y, m, d, math.floor(rem / 3600),
    math.floor(rem % 3600 / 60), rem % 60)
end

-- The job's on_done callback, if it has one: create_job kept its outbox entry without
-- kwargs under K.on_done(job) (JSON {"task", "queue", "priority", ["expires_s"]}, built by
-- cuzk_tasks/service/messages.py).  Its kwargs are {"job_id", "state", then "proofs" (`proofs`,
-- JSON text, when given) or "error"}.  Sent at most once: the kept entry is deleted in the
-- step that adds it to the outbox.  With `expires_s`, its queue is noted in
-- K.on_done_queues() (scored by when the callback expires) for the sweeper's
-- trim_callbacks.  A queue holding another type than a list (a key of someone else's; submit
-- already refused the state store's and the broker's own names, check_on_done_queue) gets
-- nothing: on_done_error on the job, an on_done_failed event.  Returns 1 when sent.
local function send_on_done(job, state, err, proofs)
  local key = K.on_done(job)
  local kept = redis.call('GET', key)
  if not kept then return 0 end
  redis.call('DEL', key)
  local m = cjson.decode(kept)
  local queue = m.queue
  local kind = redis.call('TYPE', queue)
  if type(kind) == 'table' then kind = kind.ok end
  if kind ~= 'none' and kind ~= 'list' then
    local why = 'queue ' .. queue .. ' is a Redis ' .. tostring(kind) .. ', not a list: not sent'
    redis.call('HSET', K.job(job), 'on_done_error', why)
    emit('on_done_failed', 'job', job, 'state', state, 'list', queue, 'error', why)
    return 0
  end
  local kwargs = '{"job_id": ' .. cjson.encode(job) .. ', "state": ' .. cjson.encode(state)
  if proofs then
    kwargs = kwargs .. ', "proofs": ' .. proofs .. '}'
  elseif state == 'done' then
    -- proofs over ON_DONE_PROOFS_MAX_BYTES (finalize_end), or a job of more than CHUNK
    -- partitions (the reaper): read from its result (cuzk.result), not carried
    kwargs = kwargs .. ', "proofs": null}'
  else
    kwargs = kwargs .. ', "error": ' .. cjson.encode(err or '') .. '}'
  end
  local ttl = tonumber(m.expires_s)
  if ttl and ttl > 0 then
    local was = tonumber(redis.call('ZSCORE', K.on_done_queues(), queue) or '0')
    if NOW + ttl > was then redis.call('ZADD', K.on_done_queues(), NOW + ttl, queue) end
  end
  outbox_add('{"kwargs": ' .. kwargs .. ', ' .. string.sub(kept, 2))
  redis.call('HSET', K.job(job), 'on_done_sent_at', NOW_S)
  emit('on_done', 'job', job, 'state', state, 'list', queue)
  return 1
end

-- a finished job's keys expire RETENTION_S from now (EXPIRE survives the HSETs that follow
-- in the same step, e.g. the cancelled siblings); finished jobs older than that leave the
-- recent index.  The result key has its own, shorter TTL (store_result).
-- A job of more than CHUNK partitions is only marked for the reaper (reap_jobs.lua), which
-- does this (and terminate_partitions' work) CHUNK partitions per step.
local function mark_for_reaper(job)
  redis.call('HSETNX', K.job(job), 'reap_next', 0)
  redis.call('ZADD', K.jobs_reaping(), 'NX', NOW_S, job)
end

local function job_is_big(job)
  return tonumber(redis.call('HGET', K.job(job), 'n_partitions') or '0') > CHUNK
end

local function expire_job(job)
  if not RETENTION_S or RETENTION_S <= 0 then return end
  if job_is_big(job) then return mark_for_reaper(job) end
  local ttl = math.floor(RETENTION_S)
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'n_partitions', 'request_id')
  redis.call('EXPIRE', jkey, ttl)
  for i = 0, tonumber(j[1] or '0') - 1 do redis.call('EXPIRE', K.part(job, i), ttl) end
  if not blank(j[2]) then redis.call('EXPIRE', K.request(j[2]), ttl) end
  redis.call('ZREMRANGEBYSCORE', K.jobs_recent(), '-inf', '(' .. tostring(NOW - RETENTION_S))
end

local ETA_ERRORS_KEPT = 1000
local ESTIMATE_WEIGHT = 0.3  -- of the newest sample, in the estimates' moving averages
-- a done job that had an ETA: its estimate against what it took, for /metrics; and, when
-- nothing was ahead of it and it took one round, its circuit's overhead_ms (what a job takes beyond its stage
-- times: the messages' hops, waits for a free process) moves by ESTIMATE_WEIGHT of the
-- miss, so the mean miss of such jobs goes to zero
local function observe_eta(job)
  local j = redis.call('HMGET', K.job(job), 'eta_s', 'submitted_at', 'circuit', 'position',
    'n_partitions', 'eta_devices')
  local eta, at = tonumber(j[1] or ''), tonumber(j[2] or '')
  if eta and at then
    redis.call('LPUSH', K.eta_errors(), cjson.encode({circuit = j[3], eta_s = eta,
      actual_s = NOW - at}))
    redis.call('LTRIM', K.eta_errors(), 0, ETA_ERRORS_KEPT - 1)
    -- nothing was ahead of it and its partitions took one round over the devices: the miss
    -- is the overhead's alone (a longer job's also holds how much slower partitions prove
    -- while many run)
    if tonumber(j[4]) == 0 and (tonumber(j[5]) or 0) <= (tonumber(j[6]) or 0) then
      redis.call('HINCRBYFLOAT', K.estimates(j[3]), 'overhead_ms',
        string.format('%.3f', ESTIMATE_WEIGHT * (NOW - at - eta) * 1000))
    end
  end
end

-- a job reaches a terminal state: indexes, counters, its on_done callback.  THE one end of
-- a job (done, failed, cancelled; a future deadline too): callers check the job is live.
-- `proofs`: for a done job, the proofs list as JSON text (store_result).
local function finish_job(job, state, err, proofs)
  local jkey = K.job(job)
  redis.call('HSET', jkey, 'state', state, 'finished_at', NOW_S)
  if not blank(err) then redis.call('HSET', jkey, 'error', err) end
  redis.call('ZREM', K.jobs_active(), job)
  redis.call('ZREM', K.jobs_deadlines(), job)
  redis.call('ZADD', K.jobs_recent(), NOW_S, job)
  if RECENT_KEPT and RECENT_KEPT > 0 then
    redis.call('ZREMRANGEBYRANK', K.jobs_recent(), 0, -(RECENT_KEPT + 1))
  end
  local kind = redis.call('HGET', jkey, 'kind') or ''
  -- its partitions not yet released (JOB_WINDOW) will never run
  redis.call('DEL', K.held(job))
  redis.call('HINCRBY', K.counters(), 'jobs_' .. state .. ':' .. kind, 1)
  emit('job_' .. state, 'job', job, 'error', err)
  if state == 'done' then observe_eta(job) end
  send_on_done(job, state, err, proofs)
  expire_job(job)
end

-- every live partition of a job except `except_idx` -> `state` (workers untouched:
-- a run in flight ends itself with prove_end and its own token)
-- (a job of more than CHUNK partitions: the reaper does it, CHUNK partitions per step; the
-- job's state, which every transition checks first, already stops its partitions)
local function terminate_one(job, i, state, err, quiet)
  local pkey = K.part(job, i)
  local p = redis.call('HMGET', pkey, 'state', 'worker')
  if p[1] and PART_LIVE[p[1]] then
    redis.call('HSET', pkey, 'state', state, 'error', err, 't_end', NOW_S)
    unindex(job, i, p[2])
    if not quiet then emit('partition_' .. state, 'job', job, 'idx', i) end
  end
end

local function terminate_partitions(job, except_idx, state, err)
  if job_is_big(job) then
    redis.call('HSET', K.job(job), 'reap_state', state, 'reap_error', err,
      'reap_except', except_idx)
    return mark_for_reaper(job)
  end
  local n = tonumber(redis.call('HGET', K.job(job), 'n_partitions') or '0')
  for i = 0, n - 1 do
    if tostring(i) ~= tostring(except_idx) then terminate_one(job, i, state, err, false) end
  end
end

-- A live job past its deadline fails now, its live partitions cancelled (workers untouched:
-- a run in flight ends itself, and its end finds the partition cancelled).  THE deadline
-- check: every stage's begin (synth_begin, prove_begin), finalize_end and the sweeper
-- (expire_deadlines) call it.  Returns true when the job is (now) past its deadline.
local function deadline_passed(job)
  local j = redis.call('HMGET', K.job(job), 'state', 'deadline_at', 'deadline_s', 'n_done',
    'n_partitions')
  if blank(j[2]) or NOW <= tonumber(j[2]) then return false end
  if j[1] and JOB_LIVE[j[1]] then
    local err = string.format('deadline exceeded (%s s after submit; %s of %s partitions done)',
      j[3] or '?', j[4] or '0', j[5] or '?')
    finish_job(job, 'failed', err)
    terminate_partitions(job, -1, 'cancelled', 'job failed: ' .. err)
  end
  return true
end

-- fail one live partition and (first failure) its job; `token` = the ending run's token,
-- or '' for the partition's recorded token, used only when no run of it can be in flight
-- (state ~= proving).  Returns nothing.
local function fail_core(job, idx, err, token)
  local pkey = K.part(job, idx)
  local p = redis.call('HMGET', pkey, 'state', 'attempt', 'worker', 'token')
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'state', 'kind', 'circuit')
  redis.call('HSET', pkey, 'state', 'failed', 'error', err, 't_end', NOW_S)
  unindex(job, idx, p[3])
  local tok = token
  if blank(tok) and p[1] ~= 'proving' then tok = p[4] end
  clear_worker_if(p[3], tok)
  redis.call('HINCRBY', jkey, 'n_failed', 1)
  redis.call('HINCRBY', K.counters(), 'failed:' .. (j[2] or ''), 1)
  redis.call('LPUSH', K.failures(), cjson.encode({
    job = job, idx = tonumber(idx), attempt = tonumber(p[2]), kind = j[2] or '',
    circuit = j[3] or '', worker = p[3] or '', state = p[1] or '', error = err, at = NOW_S}))
  if FAILURES_KEPT and FAILURES_KEPT > 0 then
    redis.call('LTRIM', K.failures(), 0, FAILURES_KEPT - 1)
  end
  emit('partition_failed', 'job', job, 'idx', idx, 'attempt', p[2], 'worker', p[3], 'error', err)
  if j[1] and JOB_LIVE[j[1]] then
    local jerr = 'partition ' .. idx .. ': ' .. err
    finish_job(job, 'failed', jerr)
    terminate_partitions(job, idx, 'cancelled', 'job failed: ' .. jerr)
  end
end

-- one worker as a table for the read scripts: flat HGETALL, heartbeat PTTL/value, routed count
-- A worker as the reads see it: its hash, heartbeat and outstanding (routed) partitions;
-- with HOST_AFFINE, how many of those still wait for synthesis (placed while pending: their
-- synthesize runs on the device's host first).
local function worker_record(w)
  local rec = {id = w, fields = redis.call('HGETALL', K.worker(w)),
               hb_pttl = redis.call('PTTL', K.hb(w)), hb = redis.call('GET', K.hb(w)) or '',
               outstanding = redis.call('SCARD', K.routed(w)), awaiting_synthesis = 0}
  if HOST_AFFINE and rec.outstanding > 0 then
    for _, m in ipairs(redis.call('SMEMBERS', K.routed(w))) do
      local job, idx = string.match(m, '^(.*):(%d+)$')
      local state = job and redis.call('HGET', K.part(job, idx), 'state')
      if state == 'pending' or state == 'synthesizing' then
        rec.awaiting_synthesis = rec.awaiting_synthesis + 1
      end
    end
  end
  return rec
end

-- {item = true, ...} of a comma-separated field ('' or nil: empty)
local function csv_set(text)
  local set = {}
  if not blank(text) then
    for item in string.gmatch(text, '[^,]+') do set[item] = true end
  end
  return set
end

-- true when a worker's `circuits` field (a JSON list of the circuit names its registry
-- serves, written by its heartbeats) holds `circuit`; a worker that reports none serves any
local function serves(text, circuit)
  if blank(text) or blank(circuit) then return true end
  local ok, names = pcall(cjson.decode, text)
  if not ok or type(names) ~= 'table' then return true end
  for _, n in ipairs(names) do if n == circuit then return true end end
  return false
end

-- The live devices that can prove `circuit`, read once per script run (a step that places
-- many partitions -- a job's release -- reads the workers once): a list of {worker, its
-- queue, its host's CPU queue, outstanding (size of its routed set), cold (0 when its
-- resident set holds the circuit)}.  A device must be live (heartbeat key present), of
-- role device with a queue, and serve the circuit; with HOST_AFFINE its host must also
-- have a live CPU worker that serves the circuit (its `host_queue`: that host's CPU queue),
-- or the partition's synthesize and finalize would have nowhere to run.
local DEVICES = {}
local function live_devices(circuit)
  local key = circuit or ''
  if DEVICES[key] then return DEVICES[key] end
  local members = redis.call('SMEMBERS', K.workers())
  local hosts = {}
  if HOST_AFFINE then
    for _, w in ipairs(members) do
      local f = redis.call('HMGET', K.worker(w), 'role', 'host', 'host_queue', 'circuits')
      if f[1] == 'cpu' and not blank(f[3]) and serves(f[4], circuit)
          and redis.call('EXISTS', K.hb(w)) == 1 then
        hosts[f[2]] = f[3]
      end
    end
  end
  local list = {}
  for _, w in ipairs(members) do
    local f = redis.call('HMGET', K.worker(w), 'role', 'queue', 'resident', 'host', 'circuits')
    if f[1] == 'device' and not blank(f[2]) and serves(f[5], circuit)
        and (not HOST_AFFINE or hosts[f[4] or '']) and redis.call('EXISTS', K.hb(w)) == 1 then
      local cold = 1
      if not blank(f[3]) then
        local ok, names = pcall(cjson.decode, f[3])
        if ok and type(names) == 'table' then
          for _, n in ipairs(names) do if n == circuit then cold = 0 end end
        end
      end
      list[#list + 1] = {w, f[2], hosts[f[4] or ''] or '', redis.call('SCARD', K.routed(w)), cold}
    end
  end
  DEVICES[key] = list
  return list
end

-- The device worker a partition of `circuit` goes to, among live_devices(circuit) not in
-- `avoid` (a set: devices that faulted on this partition): least outstanding, then one whose
-- resident set holds the circuit, then the smallest id.  Returns {worker, queue, host queue}
-- (the latter '' without HOST_AFFINE) or nil.  The choice counts towards the device's
-- outstanding work for the rest of this script run.
local function choose_device(circuit, avoid)
  local best
  for _, d in ipairs(live_devices(circuit)) do
    if not (avoid and avoid[d[1]]) then
      if best == nil or d[4] < best[4]
          or (d[4] == best[4] and (d[5] < best[5] or (d[5] == best[5] and d[1] < best[1]))) then
        best = d
      end
    end
  end
  if best == nil then return nil end
  best[4] = best[4] + 1
  return {best[1], best[2], best[3]}
end

-- Route one partition of this attempt, not yet routed, to `worker` (blank: the best live
-- device, choose_device) and, when `msg` is not blank, add its message to the outbox in the
-- same step (`msg`: the entry without its queue, a JSON object written by
-- cuzk_tasks/service/messages.py; the queue is put in front).  A synth_done partition gets its
-- prove, for the device's queue.  With HOST_AFFINE a pending one is *placed*: its
-- synthesize goes to the device's host's CPU queue, and its later stages stay on that host
-- (docs/architecture.md, "Placement").  Exactly one route per attempt succeeds.
-- Returns {ok 0|1, reason, worker, queue}.
local function route_core(job, idx, attempt, worker, circuit, msg)
  local js = redis.call('HGET', K.job(job), 'state')
  if not js then return {0, 'unknown', '', ''} end
  if not JOB_LIVE[js] then return {0, 'job_' .. js, '', ''} end
  local pkey = K.part(job, idx)
  local p = redis.call('HMGET', pkey, 'state', 'attempt', 'worker', 'avoid')
  if not p[1] then return {0, 'unknown', '', ''} end
  local placing = HOST_AFFINE and p[1] == 'pending'
  if (p[1] ~= 'synth_done' and not placing) or tonumber(p[2]) ~= tonumber(attempt) then
    return {0, 'stale', '', ''}
  end
  if not blank(p[3]) then return {0, 'already_routed', '', ''} end
  local queue
  if blank(worker) then
    local best = choose_device(circuit, csv_set(p[4]))
    if best == nil then return {0, 'no_live_device', '', ''} end
    worker = best[1]
    queue = placing and best[3] or best[2]
  elseif placing then
    queue = ''
    for _, d in ipairs(live_devices(circuit)) do
      if d[1] == worker then queue = d[3] end
    end
  else
    queue = redis.call('HGET', K.worker(worker), 'queue') or ''
  end
  if not blank(msg) then
    if blank(queue) then return {0, 'no_queue', worker, ''} end
    outbox_add('{"queue": ' .. cjson.encode(queue) .. ', ' .. string.sub(msg, 2))
  end
  local m = member(job, idx)
  redis.call('HSET', pkey, 'worker', worker, 't_routed', NOW_S)
  redis.call('SREM', K.unrouted(), m)
  redis.call('SADD', K.routed(worker), m)
  emit('route', 'job', job, 'idx', idx, 'attempt', attempt, 'worker', worker)
  return {1, 'ok', worker, queue}
end

-- A partition whose device, host or stage was lost, or whose device faulted, is retried
-- from: synth_done (its witness is in the one shared spool), or with HOST_AFFINE pending,
-- unplaced -- its witness was on the old host's spool, so it is synthesized again wherever
-- it is placed next.
local RETRY_FROM = HOST_AFFINE and 'pending' or 'synth_done'
local function back_for_retry(job, idx, worker, next_attempt)
  back_to_unrouted(job, idx, worker, next_attempt, RETRY_FROM)
end

-- phase-duration histograms (GET /metrics): bucket upper bounds in ms, +Inf implied; the
-- list of cuzk_tasks/state/reads.py PHASE_BUCKETS_MS (tests/test_state_store.py compares)
local PHASE_BUCKETS_MS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000}
local PHASES = {'synth_ms', 'prove_ms', 'finalize_ms'}
-- count a completed partition's phase durations into K.histograms()
local function observe_phases(partkey)
  local v = redis.call('HMGET', partkey, unpack(PHASES))
  for i, phase in ipairs(PHASES) do
    local ms = tonumber(v[i])
    if ms then
      local b = #PHASE_BUCKETS_MS
      for j = 1, #PHASE_BUCKETS_MS do
        if ms <= PHASE_BUCKETS_MS[j] then b = j - 1; break end
      end
      redis.call('HINCRBY', K.histograms(), phase .. ':' .. b, 1)
      redis.call('HINCRBYFLOAT', K.histograms(), phase .. ':sum', ms)
      redis.call('HINCRBY', K.histograms(), phase .. ':count', 1)
    end
  end
end

-- ---- estimates: each job's ETA and position, its deadline's admission ----
-- A finished partition's stage durations move its circuit's estimates (K.estimates),
-- exponentially weighted means giving the newest sample ESTIMATE_WEIGHT: synth_ms,
-- finalize_ms, and prove_ms per device kind (the backend its device advertises:
-- prove_ms:cpu, prove_ms:gpu) and of any kind (prove_ms).
local function observe_estimates(circuit, partkey, worker)
  local key = K.estimates(circuit)
  local v = redis.call('HMGET', partkey, 'synth_ms', 'prove_ms', 'finalize_ms')
  local kind = not blank(worker) and redis.call('HGET', K.worker(worker), 'backend') or nil
  local fields = {synth_ms = v[1], finalize_ms = v[3], prove_ms = v[2]}
  if not blank(kind) then fields['prove_ms:' .. kind] = v[2] end
  for field, text in pairs(fields) do
    local ms, old = tonumber(text), tonumber(redis.call('HGET', key, field) or '')
    if ms then
      redis.call('HSET', key, field, string.format('%.3f', old and old + ESTIMATE_WEIGHT * (ms - old) or ms))
    end
  end
end

-- The estimate of a job of `circuit` at priority `prio` with `remaining` partitions to
-- prove, entered the active jobs at `since` (NOW for a new one), as the devices now live
-- would finish it: the partitions of the jobs ahead of it (a better kombu priority step --
-- 0, 3, 6, 9 -- or the same step and entered earlier) at their circuits' rates, then its own
-- in rounds over its circuit's devices, plus one synthesize and one finalize, plus its
-- circuit's learned overhead (observe_eta).  A device proves at 1 / prove_ms of its kind (of
-- any kind when its kind has no sample yet).
-- Returns eta_ms, partitions ahead, devices; nil when the circuit has no estimate or no
-- live device (then nothing is said: no ETA, no refusal).
local RATES = {}
local function prove_rate(circuit)
  if RATES[circuit] == nil then
    local est = redis.call('HGETALL', K.estimates(circuit))
    local f = {}
    for i = 1, #est, 2 do f[est[i]] = tonumber(est[i + 1]) end
    local rate, n = 0, 0
    for _, d in ipairs(live_devices(circuit)) do
      local ms = f['prove_ms:' .. (redis.call('HGET', K.worker(d[1]), 'backend') or '')]
        or f['prove_ms']
      if ms then rate = rate + 1 / math.max(ms, 0.001); n = n + 1 end
    end
    RATES[circuit] = n > 0 and {rate, n, f['synth_ms'] or 0, f['finalize_ms'] or 0,
      f['overhead_ms'] or 0} or false
  end
  return RATES[circuit] or nil
end
-- a job's partitions not yet proved (nor failed): what the devices still have to do for it
local function unproved(n, n_done, n_failed, n_proved)
  local past = math.max(tonumber(n_done) or 0, tonumber(n_proved) or 0)
  return math.max(0, (tonumber(n) or 0) - past - (tonumber(n_failed) or 0))
end
local function prio_step(prio)
  local p = tonumber(prio) or 0
  return p >= 9 and 9 or p >= 6 and 6 or p >= 3 and 3 or 0
end
local function estimate(circuit, prio, remaining, since, self_job)
  local own = prove_rate(circuit)
  if not own then return nil end
  local step, ahead_ms, ahead, counted = prio_step(prio), 0, 0, {[self_job] = true}
  local active = redis.call('ZRANGE', K.jobs_active(), 0, -1, 'WITHSCORES')
  for i = 1, #active, 2 do
    local other, at = active[i], tonumber(active[i + 1])
    if other ~= self_job then
      local j = redis.call('HMGET', K.job(other), 'priority', 'circuit', 'n_partitions', 'n_done',
        'n_failed', 'n_proved')
      local s = prio_step(j[1])
      if s < step or (s == step and at < since) then
        counted[other] = true
        local left = unproved(j[3], j[4], j[5], j[6])
        if left > 0 then
          local r = prove_rate(j[2]) or own
          ahead_ms = ahead_ms + left / r[1]
          ahead = ahead + left
        end
      end
    end
  end
  -- when every device is proving a later job's partition (prove_begin's record on the
  -- worker), the first of them to finish does so in half a partition's time on average
  local busy, shortest = 0, nil
  for _, d in ipairs(live_devices(circuit)) do
    local w = redis.call('HMGET', K.worker(d[1]), 'state', 'job')
    if w[1] == 'proving' and not blank(w[2]) and not counted[w[2]] then
      local r = prove_rate(redis.call('HGET', K.job(w[2]), 'circuit') or '') or own
      busy = busy + 1
      shortest = math.min(shortest or math.huge, r[2] / r[1])
    end
  end
  if busy >= own[2] and shortest then ahead_ms = ahead_ms + 0.5 * shortest end
  local devices = own[2]
  local own_ms = math.ceil(remaining / devices) * devices / own[1] + own[3] + own[4]
  -- the learned overhead (observe_eta) never takes it below its own stage times
  return math.max(ahead_ms + own_ms + own[5], own_ms), ahead, devices
end

-- A deadline is refused only when even an estimate ADMIT_FRACTION of the ETA would miss it:
-- the estimates err (bench/eta.py measures by how much), and a job that would have made its
-- deadline must not be turned away.  A deadline between the two is admitted and may expire.
local ADMIT_FRACTION = 0.5
local function misses(eta_ms, deadline_text)
  local deadline = tonumber(deadline_text)
  return eta_ms ~= nil and deadline ~= nil and eta_ms * ADMIT_FRACTION > deadline * 1000
end

-- The ETA a new job's submit is told and that its job keeps (eta_s from submit, eta_at,
-- position: partitions ahead), or nil: see estimate.
local function record_eta(job, eta_ms, ahead, devices)
  if eta_ms then
    redis.call('HSET', K.job(job), 'eta_s', string.format('%.3f', eta_ms / 1000),
      'eta_at', string.format('%.6f', NOW + eta_ms / 1000), 'position', ahead,
      'eta_devices', devices)
  end
end

-- ---- job creation and release (create_job, create_parts, create_commit, finalize_end) ----

-- HSET `count` pending partitions of `job` from index `first`, their inputs from the
-- script's arguments: 3 per partition (input, input_ref, witness_ref) from A(base + 1).
local function write_partitions(job, first, count, base)
  for k = 0, count - 1 do
    local a = base + 3 * k
    redis.call('HSET', K.part(job, first + k), 'job', job, 'idx', first + k, 'state', 'pending',
      'attempt', 0, 'deliveries', 0, 'redispatches', 0, 'worker', '', 'token', '',
      'input', A(a + 1), 'input_ref', A(a + 2), 'witness_ref', A(a + 3),
      't_created', NOW_S, 'error', '')
  end
end

-- RPUSH the synthesize messages A(base + 1) .. A(base + count) (outbox entries, in partition
-- order) onto the job's held list: released into the outbox by release_held.
local function hold_messages(job, base, count)
  if count <= 0 then return end
  local args = {'RPUSH', K.held(job)}
  for k = 1, count do args[#args + 1] = A(base + k) end
  redis.call(unpack(args))
end

-- move up to `count` held messages of a live job into the outbox (n_released counts
-- them; partitions are released in index order, so exactly those below n_released have had
-- their synthesize queued).  A held list lost short of n_partitions releases the rest
-- without messages: the sweeper's stage check then finds them pending, unqueued, and
-- re-drives them.  Returns how many were released.
local function release_held(job, count)
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'release_list', 'n_released', 'n_partitions')
  local released, n = tonumber(j[2]) or 0, tonumber(j[3]) or 0
  if blank(j[1]) or released >= n then return 0 end
  local done = 0
  local circuit = HOST_AFFINE and redis.call('HGET', jkey, 'circuit') or ''
  while done < count and released < n do
    local msg = redis.call('LPOP', K.held(job))
    if not msg then released = n; break end
    if HOST_AFFINE then
      -- placed now: its synthesize goes to the chosen device's host; with no device that
      -- can take it, it waits unplaced for the sweeper (which builds its message again)
      local attempt = redis.call('HGET', K.part(job, released), 'attempt') or 0
      local r = route_core(job, released, attempt, '', circuit, msg)
      if r[1] ~= 1 then redis.call('SADD', K.unrouted(), member(job, released)) end
    else
      outbox_add(msg)
    end
    released = released + 1
    done = done + 1
  end
  redis.call('HSET', jkey, 'n_released', released)
  return done
end

-- a job whose partitions (and held messages) are written becomes pending and visible: its
-- request id maps to it, it joins jobs:active (and jobs:deadlines), its on_done is kept, and
-- its first `window` messages are released into the outbox (`release_list` '' = no messages: the
-- caller publishes them itself, or the job fails at once).  `window` 0 = all of them.
local function activate_job(job, req, release_list, window, ondone_spec, ondone_msg, deadline_text)
  local jkey = K.job(job)
  local j = redis.call('HMGET', jkey, 'circuit', 'kind', 'n_partitions')
  local n = tonumber(j[3])
  redis.call('HSET', jkey, 'state', 'pending', 'release_list', release_list,
    'n_released', blank(release_list) and n or 0)
  redis.call('HDEL', jkey, 'n_written')
  redis.call('ZREM', K.jobs_creating(), job)
  if req ~= '' then redis.call('SET', K.request(req), job) end
  if not blank(ondone_spec) then
    redis.call('HSET', jkey, 'on_done', ondone_spec)
    redis.call('SET', K.on_done(job), ondone_msg)
  end
  local deadline_s = tonumber(deadline_text or '')
  if deadline_s and deadline_s > 0 then
    local at = NOW + deadline_s
    redis.call('HSET', jkey, 'deadline_s', deadline_text, 'deadline_at', string.format('%.6f', at))
    redis.call('ZADD', K.jobs_deadlines(), string.format('%.6f', at), job)
  end
  redis.call('ZADD', K.jobs_active(), NOW_S, job)
  if not blank(release_list) then
    local w = tonumber(window) or 0
    release_held(job, w > 0 and w or n)
  end
  emit('job_created', 'job', job, 'circuit', j[1], 'kind', j[2], 'n_partitions', n)
end

-- The job a request id already names, as a create script answers it: {that job, 0}, or
-- {that job, -2} when the request's `digest` (the create script's argument, '' = none)
-- differs from the one kept on that job: the id reused for other content (issue 24).  A job
-- kept without one (created before digests) matches any.  nil when the key names no job.
local function request_job(request_key, digest)
  local existing = redis.call('GET', request_key)
  if not existing then return nil end
  local had = redis.call('HGET', K.job(existing), 'request_digest')
  if not blank(digest) and not blank(had) and had ~= digest then return {existing, -2} end
  return {existing, 0}
end

-- the request's `digest` (see request_job) on a job being created for request `req`
local function keep_request_digest(job_key, req, digest)
  if req ~= '' and not blank(digest) then
    redis.call('HSET', job_key, 'request_digest', digest)
  end
end

-- the job hash of a job being created (state 'creating': no read API returns it, no index
-- lists it but jobs:creating, whose score is when its creation began)
local function begin_job(job, circuit, kind, prio, req, n, state)
  redis.call('HSET', K.job(job), 'id', job, 'circuit', circuit, 'kind', kind, 'priority', prio,
    'request_id', req, 'state', state, 'n_partitions', n, 'n_done', 0, 'n_failed', 0,
    'submitted_at', NOW_S, 'error', '')
end
