"""Chaos: faults under real processes, no mocks (issue 11).

A redis-server with AOF (``appendfsync always``), two device workers (CPU backend) and one
CPU worker.  Each scenario runs jobs through one fault and asserts: every job is done and
every proof verifies; one completion per partition (counters and ``partition_done``
events: no duplicate proofs); no status sample shows a proving worker as idle; no process
died but the ones the fault killed (those are restarted before the next scenario).

The chaos suite -- every scenario carries the ``chaos`` marker (pyproject.toml); run all of
it with ``python -m pytest -q -m chaos`` (a few minutes: real processes, heartbeat TTLs):

* this file:
  ``test_redis_kill9_and_a_restart_on_its_aof`` (Redis kill -9, restarted on its AOF),
  ``test_redis_paused_longer_than_the_heartbeat_ttl`` (Redis SIGSTOP for 2 heartbeat TTLs),
  ``test_kill9_of_a_device_worker_with_partitions_queued_for_it`` (a device worker's process
  group killed mid-prove with prove messages waiting in its own queue: all re-dispatched to
  the other device),
  ``test_kill9_of_a_submitter_mid_submit`` (a client process killed while it submits: no
  partial job; resubmitting each request id is idempotent);
* tests/test_pipeline_e2e.py: ``test_kill_device_worker_mid_prove_redelivers_to_the_other``,
  ``test_kill_the_whole_cpu_worker_mid_stage_and_every_partition_gets_one_proof`` (the CPU
  worker's process group killed in synthesize and in finalize),
  ``test_kill_the_whole_cpu_worker_holding_a_submit_by_name`` (the CPU worker killed while
  it holds a by-name submit: the request lease puts it back on its queue);
* tests/test_webapp_outage.py: the status page under gunicorn while Redis is killed and
  restarted, while it is paused, and while a script keeps it BUSY (503 "state store
  unreachable", then serving again);
* tests/test_redis_faults.py (issue 24; Redis without persistence): a script past
  ``lua-time-limit`` (BUSY), Redis at ``maxmemory`` (OOM), Redis made a replica for a
  while (READONLY), Redis restarted EMPTY (the
  workers register again, new jobs complete, nothing restarted), SIGTERM to the workers
  while Redis is gone (each stops within seconds);
* tests/test_sentinel.py: ``test_a_sentinel_failover_mid_run_loses_no_job`` (kill -9 of the
  primary behind three Sentinels);
* tests/test_multihost.py (issue 27): hosts as Linux namespaces, kill -9 of a whole host and a
  30 s network partition of one.

One scenario: ``python -m pytest -q tests/test_chaos.py -k submitter``.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import select
import shutil
import signal
import subprocess
import sys
import time

from support import instruments
import pytest
from support.outcomes import both_stages_busy as _both_stages_busy
from support.outcomes import check_outcome as _check_outcome
from support.outcomes import completed as _completed
from support.outcomes import done_events as _done_events
from support.outcomes import run_through as _run_through
from support.processes import Cluster, SnapshotPoller, write_circuits_toml

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "chaoshost"
HB_INTERVAL, HB_TTL = 0.25, 1.5
PROVE_DELAY_S = 0.3
#: the cluster's workers and their arguments (a scenario that kills one restarts it alike)
WORKERS = {"dev0": ("--device", "0", "--backend", "cpu"),
           "dev1": ("--device", "1", "--backend", "cpu"),
           "cpu": ("--cpu", "--concurrency", "2")}

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def aof_redis():
    """redis-server with an append-only file synced on every write, which the tests kill -9,
    restart on the same files, pause and resume."""
    from cuzk_tasks.dev.local_redis import LocalRedis

    server = LocalRedis(aof=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster(aof_redis, tmp_path_factory):
    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("chaos")
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(write_circuits_toml(base / "cuzk.toml", {
            "mulchain": ("test-mul", FIX / "mulchain")})),
        "CUZK_REDIS_URL": aof_redis.url,
        "CUZK_PREFIX": "chaos",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENTS below
        # TEST INSTRUMENTS: keep partitions in prove and finalize across the fault
        "CUZK_TEST_PROVE_DELAY_MS": str(int(PROVE_DELAY_S * 1000)),
        "CUZK_TEST_FINALIZE_DELAY_MS": "200",
    })
    c = Cluster(base, env, load_settings(env=env), ROOT)
    try:
        for name, args in WORKERS.items():
            c.start(name, *args)
        deadline = time.monotonic() + 60
        while {w["worker_id"] for w in c.store.live_device_workers()} < {f"{HOST}:dev0", f"{HOST}:dev1"}:
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            assert time.monotonic() < deadline, "device workers did not come up\n" + c.logs()
            time.sleep(0.1)
        yield c
    finally:
        c.stop_all()


def _restart(c, name, timeout=60):
    """Start the killed worker ``name`` again with the fixture's arguments (its old log kept
    as ``<name>-killed-<n>.log``) and wait until its new process heartbeats."""
    log, n = c.base / f"{name}.log", 0
    while (c.base / f"{name}-killed-{n}.log").exists():
        n += 1
    log.rename(c.base / f"{name}-killed-{n}.log")
    sec, usec = c.store.redis.time()
    since = sec + usec / 1e6
    worker_id = f"{HOST}:{name}"
    proc = c.start(name, *WORKERS[name])
    deadline = time.monotonic() + timeout
    while True:
        w = c.store.get_worker(worker_id) or {}
        if w.get("online") and float(w.get("registered_at") or 0) >= since:
            return
        assert proc.poll() is None, f"{name} exited on its restart\n{c.logs()}"
        assert time.monotonic() < deadline, f"{name} did not come back\n{c.logs()}"
        time.sleep(0.1)


def test_redis_kill9_and_a_restart_on_its_aof(cluster, aof_redis):
    def fault(_):
        aof_redis.kill()
        time.sleep(2)
        aof_redis.restart()

    took, _ = _run_through(cluster, fault)
    print(f"redis kill -9 + AOF restart: all jobs done {took:.1f} s after the restart")
    assert took < 2 * HB_TTL + 30, cluster.logs()


def test_redis_paused_longer_than_the_heartbeat_ttl(cluster, aof_redis):
    def fault(_):
        aof_redis.proc.send_signal(signal.SIGSTOP)
        time.sleep(2 * HB_TTL)
        aof_redis.proc.send_signal(signal.SIGCONT)

    took, _ = _run_through(cluster, fault)
    print(f"redis SIGSTOP {2 * HB_TTL:.1f} s: all jobs done {took:.1f} s after SIGCONT")
    assert took < 2 * HB_TTL + 30, cluster.logs()


def test_redis_down_for_thirty_seconds_while_clients_wait(cluster, aof_redis):
    """Redis killed for 30 s (issue 11, "Reconnects"): the workers' transitions, heartbeats
    and sweeper, and the clients blocked in ``Client.wait`` all ride it out -- bounded
    backoff, no unrecoverable crash -- and every job completes once Redis is back on its
    AOF, with one proof per partition."""
    import threading

    c = cluster
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    before = _completed(c.store)
    poller = SnapshotPoller(c.store)
    poller.start()
    results, errors = {}, []

    def wait(job):
        try:
            results[job] = c.client.wait(job, timeout=150)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"{job}: {type(exc).__name__}: {exc}")

    try:
        jobs = [c.client.submit("mulchain", [{"input": inputs}] * 4) for _ in range(3)]
        waiters = [threading.Thread(target=wait, args=(j,), daemon=True) for j in jobs]
        for t in waiters:
            t.start()
        deadline = time.monotonic() + 30
        while not _both_stages_busy(c, jobs):
            assert time.monotonic() < deadline, "the moment of the fault never came\n" + c.logs()
            time.sleep(0.005)
        aof_redis.kill()
        time.sleep(30)
        aof_redis.restart()
        back = time.monotonic()
        for t in waiters:
            t.join(150)
        took = time.monotonic() - back
    finally:
        poller.stop.set()
        poller.join(5)
    assert not errors, errors
    _check_outcome(c, results, 4, before, poller)
    print(f"redis down 30 s: all jobs done {took:.1f} s after the restart")
    assert took < 2 * HB_TTL + 30, c.logs()
    for name in WORKERS:
        log = (c.base / f"{name}.log").read_text(errors="replace")
        assert "Unrecoverable error" not in log, f"{name}\n{log[-3000:]}"


def test_kill9_of_a_device_worker_with_partitions_queued_for_it(cluster):
    """kill -9 of a device worker's process group while it proves one partition and more
    prove messages wait in its own queue (and one more reserved by its Celery consumer): once
    its heartbeat expires, the sweeper re-dispatches everything routed to it (attempt + 1)
    to the other device.  Every partition finishes there, one proof each; the messages left
    in the dead device's queue are stale when it comes back."""
    from cuzk_tasks.service.queues import queue_keys

    c = cluster
    queues = {w["worker_id"]: w["queue"] for w in c.store.live_device_workers()}
    assert set(queues) == {f"{HOST}:dev0", f"{HOST}:dev1"}, queues
    at_kill = {}

    def proving_with_a_backlog(c, jobs):
        """(device, the partition it proves) once a device proves its first partition of
        ``jobs`` and its queue holds more."""
        parts = [p for j in jobs for p in c.store.list_partitions(j)]
        for worker, queue in queues.items():
            mine = [p for p in parts if p.get("worker") == worker]
            proving = [p for p in mine if p["state"] == "proving"]
            if proving and not [p for p in mine if p["state"] in ("finalizing", "done")] \
                    and c.store.queue_depth(queue_keys(queue)) > 0:
                return worker, (proving[0]["job"], proving[0]["idx"], proving[0]["attempt"]), jobs
        return None

    def kill(seen):
        victim, proving, jobs = seen
        name = victim.rsplit(":", 1)[1]
        os.killpg(c.procs[name].pid, signal.SIGKILL)
        c.procs[name].wait(5)
        # what the dead device left, read after the kill (nothing of it moves until the sweeper)
        parts = [p for j in jobs for p in c.store.list_partitions(j)]
        at_kill.update(
            victim=victim, name=name, proving=proving, jobs=jobs,
            depth=c.store.queue_depth(queue_keys(queues[victim])),
            routed=c.store.routed_partitions(victim),
            finished=[(p["job"], p["idx"]) for p in parts if p.get("worker") == victim
                      and p["state"] in ("finalizing", "done")],
            in_proving=[(p["job"], p["idx"], p["attempt"]) for p in parts
                 if p.get("worker") == victim and p["state"] == "proving"])
        return [name]

    try:
        took, parts = _run_through(c, kill, ready=proving_with_a_backlog)
    finally:
        if at_kill:
            at_kill["left"] = c.store.queue_depth(queue_keys(queues[at_kill["victim"]]))
            _restart(c, at_kill["name"])
    victim = at_kill["victim"]
    survivor = (set(queues) - {victim}).pop()
    # the kill landed as meant: mid-prove, prove messages queued for it, none of them proved
    assert at_kill["in_proving"] == [at_kill["proving"]], at_kill
    assert at_kill["depth"] > 0 and len(at_kill["routed"]) >= 1 + at_kill["depth"], at_kill
    assert at_kill["finished"] == [], at_kill
    stranded = {(job, idx) for job, idx in at_kill["routed"]}
    by_key = {(p["job"], p["idx"]): p for p in parts}
    assert stranded <= set(by_key)
    # every partition was proved on the survivor; the stranded ones on a later attempt
    assert {p["worker"] for p in parts} == {survivor}, [(p["idx"], p["worker"]) for p in parts]
    assert [p["state"] for p in parts] == ["done"] * len(parts)
    for key in stranded:
        assert int(by_key[key]["attempt"]) >= 1, by_key[key]
    # the bound: the heartbeat's expiry (2 x its TTL at most) and the work left on one device
    work = len(parts) * PROVE_DELAY_S
    print(f"device kill -9 ({victim}: 1 proving, {at_kill['depth']} queued, "
          f"{len(stranded)} routed): all jobs done {took:.1f} s after the kill, "
          f"bound {2 * HB_TTL + work + 10:.1f} s")
    assert took < 2 * HB_TTL + work + 10, c.logs()
    # back, the victim takes the prove messages left in its queue: stale (the old attempt), none
    # proves again
    completed, done = _completed(c.store), sorted(_done_events(c.store, at_kill["jobs"]))
    deadline = time.monotonic() + 20
    while c.store.queue_depth(queue_keys(queues[victim])) > 0:
        assert time.monotonic() < deadline, f"{victim} left its queue\n{c.logs()}"
        time.sleep(0.05)
    time.sleep(2 * PROVE_DELAY_S)  # the last one taken ends (it would be proving)
    assert _completed(c.store) == completed
    assert sorted(_done_events(c.store, at_kill["jobs"])) == done
    assert all(p["state"] == "done" and p["worker"] == survivor
               for j in at_kill["jobs"] for p in c.store.list_partitions(j))
    assert c.store.get_worker(victim)["state"] == "idle"
    print(f"  {at_kill['left']} stale prove(s) in {victim}'s queue at its restart: no-ops")


SUBMITTER = """\
import json, os, sys
from cuzk_tasks.client import Client
from cuzk_tasks.settings.config import load_settings

tag, n_parts, limit, input_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
inputs = json.loads(open(input_path).read())
client = Client(settings=load_settings(env=os.environ))
for i in range(limit):
    job = client.submit("mulchain", [{"input": inputs}] * n_parts, request_id=f"{tag}-req-{i}")
    print(i, job, flush=True)
"""


class _Ids:
    """The submitter's stdout lines ``"<i> <job>"`` as ``{i: job id}``."""

    def __init__(self, proc):
        self.fd, self.buf, self.ids = proc.stdout.fileno(), b"", {}

    def read(self, want=None, timeout=60.0):
        """Until ``want`` ids are in (None: until stdout closes); returns them."""
        deadline = time.monotonic() + timeout
        while want is None or len(self.ids) < want:
            left = deadline - time.monotonic()
            assert left > 0, f"the submitter printed {len(self.ids)} ids in {timeout} s"
            if not select.select([self.fd], [], [], left)[0]:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            *lines, self.buf = (self.buf + chunk).split(b"\n")  # a line cut by the kill stays
            for line in lines:
                i, job = line.decode().split()
                self.ids[int(i)] = job
        return self.ids


def test_kill9_of_a_submitter_mid_submit(cluster, tmp_path):
    """kill -9 of a client process while it submits jobs one after the other: every job in
    Redis for its request ids is whole (create_job writes the job, its partitions, the
    request id and the synthesize messages in one Lua step) and completes with one proof per
    partition; resubmitting every request id returns the existing job or creates the
    missing one, and those complete too."""
    c, n_parts = cluster, 3
    tag = f"submitter-{os.getpid()}-{time.time_ns()}"
    rid = lambda i: f"{tag}-req-{i}"
    script = tmp_path / "submitter.py"
    script.write_text(SUBMITTER)
    before = _completed(c.store)
    poller = SnapshotPoller(c.store)
    poller.start()
    try:
        with open(tmp_path / "submitter.log", "wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(script), tag, str(n_parts), "100000",
                 str(FIX / "mulchain" / "input.json")],
                cwd=ROOT, env=c.env, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
        try:
            ids, want = _Ids(proc), random.randint(3, 5)
            ids.read(want)
            delay = random.uniform(0, 0.004)  # lands anywhere in the submit under way
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
            printed = dict(ids.read(None, timeout=5))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL, (tmp_path / "submitter.log").read_text()
        k = max(printed)
        assert sorted(printed) == list(range(k + 1)), printed

        # the jobs in Redis: the printed ones, maybe the next one (killed after create_job,
        # before its print), none past it
        mapped = {i: c.store.redis.get(c.store.keys.request(rid(i))) for i in range(k + 3)}
        for i in range(k + 1):
            assert mapped[i] == printed[i], (i, mapped[i], printed[i])
        assert mapped[k + 2] is None, mapped
        existing = {i: job for i, job in mapped.items() if job is not None}
        # no job of these request ids outside the mapping, none cut short
        tagged = {}
        for key in c.store.redis.scan_iter(match=c.store.keys.job("*"), count=1000):
            req = c.store.redis.hget(key, "request_id")
            if req and req.startswith(tag):
                tagged[c.store.redis.hget(key, "id")] = req
        assert tagged == {job: rid(i) for i, job in existing.items()}, (tagged, existing)
        for i, job in existing.items():
            rec = c.store.get_job(job)
            assert rec["request_id"] == rid(i) and int(rec["n_partitions"]) == n_parts, rec
            assert len(c.store.list_partitions(job)) == n_parts, job
        results = {job: c.client.wait(job, timeout=90) for job in existing.values()}
        _check_outcome(c, results, n_parts, before, poller)

        # resubmit every request id: the same job where it exists, a new one where not
        inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
        again = {i: c.client.submit("mulchain", [{"input": inputs}] * n_parts, request_id=rid(i))
                 for i in range(k + 3)}
        for i, job in again.items():
            if i in existing:
                assert job == existing[i], (i, job, existing[i])
            else:
                assert job not in existing.values()
                assert c.store.redis.get(c.store.keys.request(rid(i))) == job
        new = {job for i, job in again.items() if i not in existing}
        assert len(new) == k + 3 - len(existing) >= 1
        results.update({job: c.client.wait(job, timeout=90) for job in new})
    finally:
        poller.stop.set()
        poller.join(5)
    _check_outcome(c, results, n_parts, before, poller)
    unprinted = sorted(i for i in existing if i not in printed)
    print(f"submitter kill -9 after {want} ids + {delay * 1000:.1f} ms: {len(printed)} ids "
          f"printed, {len(existing)} jobs in Redis (unprinted: {unprinted}), "
          f"{len(new)} created on resubmit")
