"""The worker busy flag under every interleaving: the cuzk bug, scripted and property-tested.

The bug this design exists to prevent (Filecoin cuzk): a GPU worker proving job A spawned
A's finalizer and moved on to job B; A's finalizer then ended A's GPU phase and cleared the
worker's busy flag unconditionally, so the worker showed idle while proving B.  Here a
worker's assignment is a token and every end is a compare-and-delete on it.

Redelivery (documented choice): a second delivery of the same prove message while the
partition is in proving on that worker is ACCEPTED and counted as a delivery (reason
"redelivered", a new token; the earlier run is presumed dead -- a device worker runs one
task at a time).  After the partition left proving (prove_end ran) a redelivery is rejected as
"stale".  Both backends (fakeredis, redis-server) run every test.
"""

import dataclasses

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

from cuzk_tasks.state import PartitionRun, StateStore

# --- the cuzk timeline, scripted ------------------------------------------------------------


def _setup(store, jobs=("A", "B"), worker="W"):
    store.register_worker(worker, "device", "host", device=0, queue="cuzk.dev.host.0")
    store.heartbeat(worker, 60)
    for job in jobs:
        assert store.create_job(job, "c", "k", 5, None, [{"input": "{}"}]) == (job, True)
        assert store.synth_begin(PartitionRun(job, 0, 0))
        assert store.synth_end(PartitionRun(job, 0, 0), f"/spool/{job}.wtns", 1.0)
        assert store.route(PartitionRun(job, 0, 0), worker)
    return worker


def _shows(store, worker):
    w = store.get_worker(worker)
    return w["state"], w.get("job"), w.get("partition"), w.get("token")


@pytest.mark.parametrize("own_end", [True, False], ids=["with-own-prove_end", "without-own-prove_end"])
@pytest.mark.parametrize("late", ["finalize_end", "finalize_end+token", "prove_end", "prove_end+finalize_end",
                                  "fail_partition", "fail_partition+token"])
def test_cuzk_timeline(store, own_end, late):
    W = _setup(store)
    # 1. worker W prove_begin A
    a = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    assert a.ok
    # 2. A's GPU phase finishes (with W's own prove_end -> W idle, or without it)
    if own_end:
        end = store.prove_end(W, a.token, PartitionRun("A", 0, 0), 10.0)
        assert end.worker_cleared and end.partition_advanced
        assert _shows(store, W)[0] == "idle"
    # 3. A's finalizer is queued (nothing in Redis)
    # 4. W prove_begin B
    b = store.prove_begin(W, PartitionRun("B", 0, 0), 3)
    assert b.ok
    assert _shows(store, W) == ("proving", "B", 0, b.token)
    # 5. A's finalize_end and/or a late prove_end with A's token
    token = a.token if late.endswith("+token") else None
    if late.startswith("prove_end"):
        end = store.prove_end(W, a.token, PartitionRun("A", 0, 0), 10.0)
        assert not end.worker_cleared
        assert end.partition_advanced == (not own_end)
    if late.startswith("finalize_end") or late.endswith("+finalize_end"):
        fin = store.finalize_end(PartitionRun("A", 0, 0), 5.0, "{}", "[]", token=token)
        assert fin.ok and fin.job_complete
        assert store.get_job("A")["state"] == "done"
    if late.startswith("fail_partition"):
        assert store.fail_partition(PartitionRun("A", 0, 0), "self-verification failed",
                                    token=token)
        assert store.get_job("A")["state"] == "failed"
    # W still shows proving B with B's token
    assert _shows(store, W) == ("proving", "B", 0, b.token)
    # and B's own end clears it
    end = store.prove_end(W, b.token, PartitionRun("B", 0, 0), 10.0)
    assert end.worker_cleared and end.partition_advanced
    assert _shows(store, W) == ("idle", None, None, None)


def test_cuzk_timeline_same_job_two_partitions(store):
    W = "W"
    store.register_worker(W, "device", "host", device=0, queue="q")
    store.heartbeat(W, 60)
    store.create_job("J", "c", "k", 5, None, [{"input": "{}"}, {"input": "{}"}])
    for i in (0, 1):
        store.synth_begin(PartitionRun("J", i, 0)), store.synth_end(PartitionRun("J", i, 0),
                                                                    "/w", 1.0)
        assert store.route(PartitionRun("J", i, 0), W)
    a = store.prove_begin(W, PartitionRun("J", 0, 0), 3)
    assert store.prove_end(W, a.token, PartitionRun("J", 0, 0), 1.0).worker_cleared
    b = store.prove_begin(W, PartitionRun("J", 1, 0), 3)
    assert not store.prove_end(W, a.token, PartitionRun("J", 0, 0), 1.0).worker_cleared
    fin = store.finalize_end(PartitionRun("J", 0, 0), 1.0, "{}", "[]")
    assert fin.ok and not fin.job_complete
    assert _shows(store, W) == ("proving", "J", 1, b.token)
    store.prove_end(W, b.token, PartitionRun("J", 1, 0), 1.0)
    assert store.finalize_end(PartitionRun("J", 1, 0), 1.0, "{}", "[]").job_complete


def test_cuzk_timeline_reverse_order(store):
    """A's finalize_end (and late end) BEFORE W starts B, then another late end after."""
    W = _setup(store)
    a = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    # W's own prove_end never ran; A's finalizer completes first
    assert store.finalize_end(PartitionRun("A", 0, 0), 1.0, "{}", "[]", token=a.token).job_complete
    assert _shows(store, W)[0] == "idle"       # its own (finished) run's token: cleared
    b = store.prove_begin(W, PartitionRun("B", 0, 0), 3)
    for _ in range(2):                          # late duplicates of A's ends
        assert not store.prove_end(W, a.token, PartitionRun("A", 0, 0), 1.0).worker_cleared
        assert not store.finalize_end(PartitionRun("A", 0, 0), 1.0, "{}", "[]").ok
        assert not store.fail_partition(PartitionRun("A", 0, 0), "late", token=a.token)
    assert _shows(store, W) == ("proving", "B", 0, b.token)


def test_cuzk_timeline_with_an_end_handed_on_unread(store):
    """A device with a partition routed behind its run hands prove_end on unread
    (send_prove_end) and begins the next run at once, reading the reply after that run's
    compute.  Still a compare-and-delete: A's end clears only A's run, B's begin holds the
    worker, and A's end run again (its reply lost: SentStep.reply runs the step again) is a
    stale no-op that leaves B's run alone."""
    relay = StateStore(store.redis, prefix=store.prefix, relay=True)
    W = _setup(relay)
    a = relay.prove_begin(W, PartitionRun("A", 0, 0), 3)
    sent = relay.send_prove_end(W, a.token, PartitionRun("A", 0, 0), 10.0)
    b = relay.prove_begin(W, PartitionRun("B", 0, 0), 3)  # before A's reply is read
    assert b.ok and _shows(relay, W) == ("proving", "B", 0, b.token)
    end = sent.reply()
    assert end.worker_cleared and end.partition_advanced
    again = relay.prove_end(W, a.token, PartitionRun("A", 0, 0), 10.0)
    assert not again.worker_cleared and not again.partition_advanced
    assert relay.finalize_end(PartitionRun("A", 0, 0), 5.0, "{}", "[]", token=a.token).ok
    assert _shows(relay, W) == ("proving", "B", 0, b.token)
    with pytest.raises(ValueError, match="relay"):
        store.send_prove_end(W, b.token, PartitionRun("B", 0, 0), 10.0)  # a publishing store


def test_cuzk_timeline_failure_after_moving_on(store):
    W = _setup(store)
    a = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    assert store.prove_end(W, a.token, PartitionRun("A", 0, 0), 1.0).partition_advanced
    b = store.prove_begin(W, PartitionRun("B", 0, 0), 3)
    assert store.fail_partition(PartitionRun("A", 0, 0),
                                "finalize crashed")      # A's finalizer fails
    assert _shows(store, W) == ("proving", "B", 0, b.token)
    assert store.get_job("A")["state"] == "failed"
    assert store.get_job("B")["state"] == "running"


def test_redelivery_after_prove_end_is_stale(store):
    """The same message delivered twice, the second after the first run's prove_end (the worker
    died before acking): rejected as stale, counting nothing, W keeps showing B."""
    W = _setup(store)
    a = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    store.prove_end(W, a.token, PartitionRun("A", 0, 0), 1.0)
    b = store.prove_begin(W, PartitionRun("B", 0, 0), 3)
    again = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    assert (again.ok, again.reason, again.deliveries) == (False, "stale", 1)
    assert _shows(store, W) == ("proving", "B", 0, b.token)


def test_redelivery_while_proving_is_counted_and_takes_over(store):
    """The same message delivered again while A is still in proving on W (its first run died
    without prove_end): accepted as a delivery with a new token; the dead run's late ends
    neither clear W nor advance A."""
    W = _setup(store)
    first = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    store.register_worker(W, "device", "host", device=0, queue="q")   # W restarted
    second = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    assert (second.ok, second.reason, second.deliveries) == (True, "redelivered", 2)
    assert _shows(store, W) == ("proving", "A", 0, second.token)
    end = store.prove_end(W, first.token, PartitionRun("A", 0, 0), 1.0)
    assert (end.worker_cleared, end.partition_advanced) == (False, False)
    assert _shows(store, W) == ("proving", "A", 0, second.token)


@pytest.mark.parametrize("token", ["first", None])
def test_finalizer_of_a_returned_run_while_its_redelivery_runs(store, token):
    """Run 1 of A returned without prove_end (its finalizer is queued), W died before acking,
    restarted, and runs the redelivered message (run 2).  Run 1's finalizer completes A but
    must not clear W: with run 1's token it does not match; without a token the partition
    is still in proving, where the recorded token may be (here: is) a run in flight."""
    W = _setup(store, jobs=("A",))
    first = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    store.register_worker(W, "device", "host", device=0, queue="q")
    second = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    fin = store.finalize_end(PartitionRun("A", 0, 0), 1.0, "{}", "[]",
                             token=first.token if token == "first" else None)
    assert fin.ok and fin.job_complete
    assert _shows(store, W) == ("proving", "A", 0, second.token)
    end = store.prove_end(W, second.token, PartitionRun("A", 0, 0), 1.0)
    assert end.worker_cleared and not end.partition_advanced


def test_redelivery_of_old_attempt_after_redispatch(store):
    """W's heartbeat expired, A was re-dispatched to V; W comes back and gets A's old message."""
    W = _setup(store, jobs=("A",))
    store.register_worker("V", "device", "host", device=1, queue="q1")
    store.heartbeat("V", 60)
    store.worker_offline(W)
    assert store.redispatch(PartitionRun("A", 0, 0), worker_id=W)
    assert store.route(PartitionRun("A", 0, 1), "V")
    v = store.prove_begin("V", PartitionRun("A", 0, 1), 3)
    store.heartbeat(W, 60)
    old = store.prove_begin(W, PartitionRun("A", 0, 0), 3)
    assert (old.ok, old.reason) == (False, "stale")
    assert _shows(store, "V") == ("proving", "A", 0, v.token)
    assert _shows(store, W)[0] == "idle"


# --- the property: arbitrary interleavings ------------------------------------------------------

WORKERS = ("w0", "w1", "w2")
MAX_DELIVERIES = 3


@dataclasses.dataclass(frozen=True)
class Run:
    worker: str
    job: str
    idx: int
    attempt: int
    token: str


class BusyFlagMachine(RuleBasedStateMachine):
    """Model: which prove run is in flight on each worker (one at a time, as a device
    worker runs one task at a time).  Invariant after every step: a worker with a run in
    flight shows exactly (proving, job, partition, token) of that run; in particular it
    never shows idle while a run is in flight."""

    factory = None  # set by the test

    def __init__(self):
        super().__init__()
        self.store = type(self).factory()
        self.in_flight: dict[str, Run] = {}
        self.ended: list[Run] = []          # runs that are over (returned, failed, crashed)
        self.returned: list[Run] = []       # runs whose prove returned: finalizer messages
        self.messages: list[tuple] = []     # every prove message ever sent (redeliverable)
        self.online = set()
        self.completions: dict[str, int] = {}
        self.jobs: dict[str, int] = {}

    @initialize(sizes=st.lists(st.integers(1, 3), min_size=3, max_size=4))
    def setup(self, sizes):
        for w in WORKERS:
            self.store.register_worker(w, "device", "h", device=int(w[1]), queue=f"q.{w}")
            self.store.heartbeat(w, 3600)
            self.online.add(w)
        for j, n in enumerate(sizes):
            job = f"j{j}"
            self.store.create_job(job, "c", "k", 5, None, [{"input": "{}"}] * n)
            self.jobs[job] = n
            self.completions[job] = 0

    def _partition(self, pick):
        job = sorted(self.jobs)[pick % len(self.jobs)]
        return job, (pick // 11) % self.jobs[job]

    # -- pipeline steps --

    @rule(pick=st.integers(0, 10**6), worker=st.sampled_from(WORKERS))
    def submit_to_device(self, pick, worker):
        """synthesize (if pending) and route one partition to a device: a message is sent."""
        candidates = []
        for job, n in sorted(self.jobs.items()):
            for idx in range(n):
                p = self.store.get_partition(job, idx)
                if p["state"] == "pending" or (p["state"] == "synth_done" and not p.get("worker")):
                    candidates.append((job, idx))
        if not candidates:
            return
        job, idx = candidates[pick % len(candidates)]
        if self.store.synth_begin(PartitionRun(job, idx, 0)):
            self.store.synth_end(PartitionRun(job, idx, 0), "/w", 1.0)
        part = self.store.get_partition(job, idx)
        run = PartitionRun(job, idx, part["attempt"])
        if part["state"] == "synth_done" and self.store.route(run, worker):
            self.messages.append((worker, job, idx, part["attempt"]))

    @precondition(lambda self: self.messages)
    @rule(pick=st.integers(0, 10**6), newest=st.booleans())
    def deliver(self, pick, newest):
        """A prove message (new, duplicate, redelivered or stale) reaches its worker,
        if that worker is free (one task at a time)."""
        free = [m for m in self.messages if m[0] not in self.in_flight]
        if not free:
            return
        worker, job, idx, attempt = free[-1] if newest else free[pick % len(free)]
        r = self.store.prove_begin(worker, PartitionRun(job, idx, attempt), MAX_DELIVERIES)
        if r.ok:
            self.in_flight[worker] = Run(worker, job, idx, attempt, r.token)

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 10**6), own_end=st.booleans())
    def prove_returns(self, pick, own_end):
        """prove returns; the worker's prove_end runs (or is lost); the finalizer is queued."""
        worker = sorted(self.in_flight)[pick % len(self.in_flight)]
        run = self.in_flight.pop(worker)
        if own_end:
            self.store.prove_end(worker, run.token, PartitionRun(run.job, run.idx, run.attempt), 1.0)
        self.ended.append(run)
        self.returned.append(run)

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 10**6), order=st.sampled_from(["end_first", "fail_first",
                                                              "fail_no_token"]))
    def prove_raises(self, pick, order):
        """prove raises: the run fails its partition (and job) and ends."""
        worker = sorted(self.in_flight)[pick % len(self.in_flight)]
        run = self.in_flight.pop(worker)
        s, r = self.store, run
        if order == "end_first":
            s.prove_end(worker, r.token, PartitionRun(r.job, r.idx, r.attempt), 1.0)
            s.fail_partition(PartitionRun(r.job, r.idx, r.attempt), "prove raised",
                             token=r.token)
        elif order == "fail_first":
            s.fail_partition(PartitionRun(r.job, r.idx, r.attempt), "prove raised",
                             token=r.token)
            s.prove_end(worker, r.token, PartitionRun(r.job, r.idx, r.attempt), 1.0)
        else:  # what pipeline.prove does: fail without token, prove_end in finally
            s.fail_partition(PartitionRun(r.job, r.idx, r.attempt), "prove raised")
            s.prove_end(worker, r.token, PartitionRun(r.job, r.idx, r.attempt), 1.0)
        self.ended.append(run)

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 10**6), max_faults=st.integers(1, 3))
    def device_fault(self, pick, max_faults):
        """prove hits a device error: prove_fault clears the worker (compare-and-delete)
        and moves the partition to another live device (a new message) or fails it."""
        worker = sorted(self.in_flight)[pick % len(self.in_flight)]
        run = self.in_flight.pop(worker)
        fault = self.store.prove_fault(worker, run.token, PartitionRun(run.job, run.idx, run.attempt),
                                       "cudaErrorIllegalAddress", "c", max_faults)
        if fault.outcome == "rerouted":
            assert fault.worker != worker and fault.worker in self.online, fault
            self.messages.append((fault.worker, run.job, run.idx, run.attempt + 1))
        self.ended.append(run)

    @rule(worker=st.sampled_from(WORKERS), restart=st.booleans())
    def crash(self, worker, restart):
        """The worker process dies (its run with it); maybe it restarts and re-registers."""
        run = self.in_flight.pop(worker, None)
        if run is not None:
            self.ended.append(run)
        if restart:
            self.store.register_worker(worker, "device", "h", device=int(worker[1]), queue=f"q.{worker}")
            self.store.heartbeat(worker, 3600)
            self.online.add(worker)

    @precondition(lambda self: self.ended)
    @rule(pick=st.integers(0, 10**6), at=st.sampled_from(["own", "busy", "any"]),
          worker=st.sampled_from(WORKERS), fault=st.booleans())
    def stale_end(self, pick, at, worker, fault):
        """A late or duplicated prove_end (or prove_fault) of a run that is over: on its own
        worker, on a worker that is busy right now, or misdirected to any worker."""
        r = self.ended[pick % len(self.ended)]
        if at == "own" or (at == "busy" and not self.in_flight):
            worker = r.worker
        elif at == "busy":
            worker = sorted(self.in_flight)[pick % len(self.in_flight)]
        if fault:
            self.store.prove_fault(worker, r.token, PartitionRun(r.job, r.idx, r.attempt), "late",
                                   "c", 3)
        else:
            self.store.prove_end(worker, r.token, PartitionRun(r.job, r.idx, r.attempt), 1.0)

    @precondition(lambda self: self.returned)
    @rule(pick=st.integers(0, 10**6), ok=st.booleans(), pass_token=st.booleans())
    def finalize(self, pick, ok, pass_token):
        """A finalizer (possibly a duplicate, possibly for an old attempt) ends."""
        r = self.returned[pick % len(self.returned)]
        token = r.token if pass_token else None
        if ok:
            res = self.store.finalize_end(PartitionRun(r.job, r.idx, r.attempt), 1.0, "{}", "[]",
                                          token=token)
            if res.job_complete:
                assert res.ok
                self.completions[r.job] += 1
        else:
            self.store.fail_partition(PartitionRun(r.job, r.idx, r.attempt),
                                      "self-verification failed", token=token)

    @rule(worker=st.sampled_from(WORKERS), expire=st.booleans(), sweepers=st.integers(1, 2),
          by_worker=st.booleans())
    def heartbeat(self, worker, expire, sweepers, by_worker):
        """A heartbeat, or its expiry (the run, if any, goes on) after which one or two
        sweepers re-dispatch the dead worker's routed partitions: only one may win each."""
        if not expire:
            self.store.heartbeat(worker, 3600)
            self.online.add(worker)
            return
        self.store.worker_offline(worker)
        self.online.discard(worker)
        wins = {}
        for _ in range(sweepers):
            for dead in self.store.dead_workers_with_routed():
                for job, idx in self.store.routed_partitions(dead):
                    part = self.store.get_partition(job, idx)
                    if part["state"] not in ("synth_done", "proving"):
                        continue
                    key = (job, idx, part["attempt"])
                    if self.store.redispatch(PartitionRun(job, idx, part["attempt"]),
                                             worker_id=dead if by_worker else None):
                        wins[key] = wins.get(key, 0) + 1
        assert all(n == 1 for n in wins.values()), wins

    @rule(pick=st.integers(0, 10**6),
          what=st.sampled_from(["new_job", "new_job", "cancel", "fail", "fail_running"]))
    def client(self, pick, what):
        """Clients and operators: submit a job (keeps work coming), cancel one, or fail a
        partition from outside any run (no attempt, no token) -- often one whose run is in
        flight right now."""
        if what == "new_job":
            live = [j for j in self.jobs if self.store.get_job(j)["state"] in ("pending", "running")]
            if len(live) < 3:
                job = f"j{len(self.jobs)}"
                n = 1 + pick % 3
                self.store.create_job(job, "c", "k", 5, None, [{"input": "{}"}] * n)
                self.jobs[job] = n
                self.completions[job] = 0
        elif what == "cancel":
            self.store.cancel_job(sorted(self.jobs)[pick % len(self.jobs)])
        else:
            if what == "fail_running" and self.in_flight:
                run = sorted(self.in_flight.values(), key=lambda r: r.worker)[pick % len(self.in_flight)]
                job, idx = run.job, run.idx
            else:
                job, idx = self._partition(pick)
            self.store.fail_partition(PartitionRun(job, idx), "failed by operator",
                                      any_attempt=True)

    # the pipeline's main steps twice as likely as the rest
    deliver_again = deliver
    prove_returns_again = prove_returns
    submit_again = submit_to_device

    # -- invariants --

    @invariant()
    def busy_flag_is_exact(self):
        for w in WORKERS:
            shown = self.store.get_worker(w)
            run = self.in_flight.get(w)
            if run is not None:
                assert (shown["stored_state"], shown.get("job"), shown.get("partition"),
                        shown.get("token")) == ("proving", run.job, run.idx, run.token), (w, run, shown)
            if shown["stored_state"] == "idle":
                assert run is None and shown.get("token") is None
            assert (shown["state"] == "offline") == (w not in self.online)

    @invariant()
    def jobs_complete_exactly_once(self):
        for job, n in self.jobs.items():
            j = self.store.get_job(job)
            parts = self.store.list_partitions(job)
            done = sum(p["state"] == "done" for p in parts)
            assert j["n_done"] == done
            assert self.completions[job] == (1 if j["state"] == "done" else 0)
            if j["state"] == "done":
                assert done == n
            if j["state"] in ("failed", "cancelled"):
                assert all(p["state"] in ("done", "failed", "cancelled") for p in parts)
            for p in parts:
                assert p["deliveries"] <= MAX_DELIVERIES + 1
                if p["deliveries"] > MAX_DELIVERIES:
                    assert p["state"] == "failed" and "poison" in p["error"]

    @invariant()
    def routing_indexes_match_partitions(self):
        routed = {w: set(self.store.routed_partitions(w)) for w in WORKERS}
        unrouted = set(self.store.unrouted_partitions())
        for job, n in self.jobs.items():
            for idx in range(n):
                p = self.store.get_partition(job, idx)
                where = {w for w, members in routed.items() if (job, idx) in members}
                if p["state"] in ("synth_done", "proving") and p.get("worker"):
                    assert where == {p["worker"]} and (job, idx) not in unrouted
                elif p["state"] == "synth_done":
                    assert not where and (job, idx) in unrouted
                else:
                    assert not where and (job, idx) not in unrouted, (job, idx, p)


def test_busy_flag_under_arbitrary_interleavings(store_factory):
    BusyFlagMachine.factory = store_factory
    try:
        run_state_machine_as_test(BusyFlagMachine, settings=settings(
            max_examples=40, stateful_step_count=50, deadline=None,
            suppress_health_check=[HealthCheck.too_slow]))
    finally:
        BusyFlagMachine.factory = None
