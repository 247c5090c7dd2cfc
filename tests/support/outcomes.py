"""The outcome checks of the fault tests (tests/test_chaos.py, tests/test_multihost.py): jobs
run through one fault, then every job done with valid proofs, one completion per partition."""

from __future__ import annotations

import json
import pathlib
import time

from support.processes import SnapshotPoller

FIX = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


def completed(store):
    return sum(v for k, v in store.snapshot()["counters"].items() if k.startswith("completed:"))


def done_events(store, jobs):
    """``(job, idx)`` of every partition_done event of ``jobs``, duplicates kept."""
    out = []
    for _, fields in store.redis.xrange(store.keys.events()):
        if fields.get("type") == "partition_done" and fields.get("job") in jobs:
            out.append((fields["job"], int(fields["idx"])))
    return out


def both_stages_busy(c, jobs):
    """The default moment of a fault: partitions in prove and in a CPU stage."""
    states = {p["state"] for j in jobs for p in c.store.list_partitions(j)}
    return "proving" in states and bool(states & {"finalizing", "synthesizing", "pending"})


def run_through(c, fault, ready=both_stages_busy, n_jobs=3, n_parts=4):
    """Submit jobs, run ``fault(seen)`` once ``ready(c, jobs)`` returns ``seen`` (truthy),
    then check the outcome (:func:`check_outcome`).  ``fault`` returns the names of the
    processes it killed on purpose (or None).  Returns (seconds from the end of the fault to
    the last job done, the jobs' partitions at the end)."""
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    before = completed(c.store)
    poller = SnapshotPoller(c.store)
    poller.start()
    killed = ()
    try:
        jobs = [c.client.submit("mulchain", [{"input": inputs}] * n_parts) for _ in range(n_jobs)]
        deadline, seen = time.monotonic() + 30, None
        while not seen and time.monotonic() < deadline:
            seen = ready(c, jobs)
            time.sleep(0.005)
        assert seen, f"the moment of the fault never came\n{c.logs()}"
        killed = fault(seen) or ()
        ended = time.monotonic()
        results = {j: c.client.wait(j, timeout=90) for j in jobs}
        took = time.monotonic() - ended
    finally:
        poller.stop.set()
        poller.join(5)
    check_outcome(c, results, n_parts, before, poller, killed)
    return took, [p for j in jobs for p in c.store.list_partitions(j)]


def check_outcome(c, results, n_parts, before, poller, killed=()):
    """``results`` ({job: its result}) hold ``n_parts`` proofs each, all valid; the
    completed counter grew by exactly one per partition since ``before``; one
    ``partition_done`` per partition; the poller saw no proving worker idle; no process
    died but those in ``killed``."""
    from cuzk_tasks.groth16 import verify

    vk = json.loads((FIX / "mulchain" / "verification_key.json").read_text())
    for job, result in results.items():
        assert len(result["proofs"]) == n_parts, job
        for item in result["proofs"]:
            assert verify(vk, item["public"], item["proof"]), job
    n = len(results) * n_parts
    assert completed(c.store) - before == n
    done = done_events(c.store, set(results))
    assert sorted(done) == sorted(set(done)) and len(done) == n, sorted(done)
    assert poller.count > 0 and not poller.violations, poller.violations[:5]
    for name, proc in c.procs.items():
        if name not in killed:
            assert proc.poll() is None, f"{name} died in the fault\n{c.logs()}"
    parts = [p for j in results for p in c.store.list_partitions(j)]
    print(f"  re-driven stages: {sum(p.get('lost_messages') or 0 for p in parts)}, "
          f"re-dispatches: {sum(p.get('redispatches') or 0 for p in parts)}, "
          f"status samples: {poller.count} ({poller.outages} in the outage)")
