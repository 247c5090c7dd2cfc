"""End to end through real processes: redis-server, two device workers, one CPU worker.

The device workers run the CPU backend (``--backend cpu``) so this runs without a GPU.
Test-only instruments (env vars, see cuzk_tasks/settings/defaults.py) make finalize slow
(CUZK_TEST_FINALIZE_DELAY_MS, so finalizers overlap the next prove), make
prove slow per circuit (CUZK_TEST_PROVE_DELAY_MS) and make prove of the
test-only circuit ``poison_test`` kill its process (CUZK_TEST_POISON_CIRCUIT).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

from support import instruments
import pytest
from support.outbox import decode
from support.processes import Cluster, SnapshotPoller, dump_stacks, write_circuits_toml

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
HOST = "e2ehost"
HB_INTERVAL, HB_TTL = 0.25, 1.5
MAX_DELIVERIES = 2
INLINE_LIMIT = 4096
#: kombu's Redis transport: the hash of delivered, not yet acknowledged messages
#: (delivery tag -> JSON [envelope, exchange, routing key])
UNACKED = "unacked"

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def e2e_redis():
    """A redis-server of this module's own (Celery queue keys are not prefixed)."""
    from support.redis_server import RedisServer

    server = RedisServer()
    try:
        yield server.url
    finally:
        server.stop()


def _config(base):
    return write_circuits_toml(base / "cuzk.toml", {
        "mulchain": ("test-mul", FIX / "mulchain"),
        "poseidon": ("test-poseidon", FIX / "poseidon"),
        "bls_mulchain": ("test-bls-mul", FIX / "bls12381" / "mulchain"),
        "assert_fail": ("test-assert", FIX / "assert_fail"),
        # TEST-ONLY circuits: same files, singled out by the test instruments
        "poison_test": ("test-poison", FIX / "mulchain"),
        "slow_test": ("test-slow", FIX / "mulchain"),
        # never finishes a partition: no estimate, so its deadline is admitted and expires
        "deadline_test": ("test-deadline", FIX / "mulchain"),
    })


@pytest.fixture(scope="module")
def cluster(e2e_redis, tmp_path_factory):
    from cuzk_tasks.settings.config import load_settings

    base = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ)
    env.update({
        "CUZK_CONFIG": str(_config(base)),
        "CUZK_REDIS_URL": e2e_redis,
        "CUZK_PREFIX": "e2e",
        "CUZK_HOSTNAME": HOST,
        "CUZK_HEARTBEAT_INTERVAL_S": str(HB_INTERVAL),
        "CUZK_HEARTBEAT_TTL_S": str(HB_TTL),
        "CUZK_MAX_DELIVERIES": str(MAX_DELIVERIES),
        "CUZK_MAX_INLINE_INPUT_BYTES": str(INLINE_LIMIT),
        "CUZK_SPOOL_DIR": str(base / "spool"),
        "CUZK_ALLOWED_INPUT_ROOTS": str(FIX),  # the tests' input_ref / witness_ref fixtures
        "CUZK_RESULTS_DIR": str(base / "results"),
        "CUZK_THREADS": "1",
        **instruments.env(env.get("PYTHONPATH", "")),  # the TEST INSTRUMENTS below
        # TEST INSTRUMENTS
        "CUZK_TEST_FINALIZE_DELAY_MS": "200",
        "CUZK_TEST_PROVE_DELAY_MS": "slow_test=2500,deadline_test=2500,300",
        "CUZK_TEST_POISON_CIRCUIT": "poison_test",
    })
    settings = load_settings(env=env)
    c = Cluster(base, env, settings, ROOT)
    try:
        c.start("dev0", "--device", "0", "--backend", "cpu")
        c.start("dev1", "--device", "1", "--backend", "cpu")
        c.start("cpu", "--cpu", "--concurrency", "2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            live = {w["worker_id"] for w in c.store.live_device_workers()}
            if live >= {f"{HOST}:dev0", f"{HOST}:dev1"}:
                break
            for name, proc in c.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{c.logs()}"
            time.sleep(0.1)
        else:
            pytest.fail("device workers did not come up\n" + c.logs())
        c.await_roles()  # and the CPU worker, which by-name requests need
        yield c
    finally:
        c.stop_all()


def _input(name):
    return json.loads((FIX / name / "input.json").read_text())


def _vkey(name):
    return json.loads((FIX / name / "verification_key.json").read_text())


def _proofs(result):
    return result["proofs"] if isinstance(result, dict) else result


def _assert_valid(result, circuit_dir, n):
    from cuzk_tasks.groth16 import verify

    proofs = _proofs(result)
    assert len(proofs) == n
    vk = _vkey(circuit_dir)
    for item in proofs:
        assert verify(vk, item["public"], item["proof"])


def test_overlapping_jobs_all_prove_once_and_busy_never_idle(cluster):
    c = cluster
    poller = SnapshotPoller(c.store)
    poller.start()
    try:
        # ready witnesses first: each device gets back-to-back prove messages (300 ms each) while
        # the previous partition's finalizer (200 ms delay) ends -- the cuzk-bug interleaving
        wtns = {"witness_ref": str(FIX / "mulchain" / "witness.wtns")}
        jobs = [
            (c.client.submit("mulchain", [wtns] * 6), "mulchain", 6),
            (c.client.submit("mulchain", [{"input": _input("mulchain")}] * 3), "mulchain", 3),
            (c.client.submit("poseidon", [{"input": _input("poseidon")}] * 3), "poseidon", 3),
            (c.client.submit("mulchain", [{"input_ref": str(FIX / "mulchain" / "input.json")},
                                          {"witness_ref": str(FIX / "mulchain" / "witness.wtns")}]),
             "mulchain", 2),
        ]
        results = {}
        for job_id, circuit, n in jobs:
            try:
                results[job_id] = c.client.wait(job_id, timeout=60)
            except Exception:
                dump_stacks(c.procs.values())
                print(c.logs(tail=20000))
                raise
            _assert_valid(results[job_id], circuit, n)
    finally:
        poller.stop.set()
        poller.join(5)
    assert poller.count > 20
    assert poller.busy_seen > 0, "the poller never saw a proving worker"
    assert poller.violations == [], f"busy workers shown idle: {poller.violations[:5]}"
    for job_id, circuit, n in jobs:
        job = c.store.get_job(job_id)
        assert job["state"] == "done" and int(job["n_done"]) == n
        parts = c.store.list_partitions(job_id)
        assert [p["state"] for p in parts] == ["done"] * n
        assert (c.base / "results" / f"{job_id}.json").exists()
    # exactly once: one job_done event per job, one partition_done per partition
    events = [fields for _, fields in c.store.events(count=5000)]
    for job_id, _, n in jobs:
        mine = [e for e in events if e.get("job") == job_id]
        assert sum(1 for e in mine if e.get("type", e.get("kind")) == "job_done") == 1, mine
        assert sum(1 for e in mine if e.get("type", e.get("kind")) == "partition_done") == n
    # the scenario of the cuzk bug happened: a finalizer ended while its device proved another
    parts = [p for job_id, _, _ in jobs for p in c.store.list_partitions(job_id)]
    overlaps = [(a["idx"], b["idx"]) for a in parts for b in parts
                if a is not b and a["worker"] == b["worker"]
                and float(b["t_prove_start"]) < float(a["t_done"]) < float(b["t_prove_end"])]
    print(f"{len(overlaps)} finalizers overlapped a prove on their device; "
          f"{poller.count} snapshots")
    assert overlaps, "no finalizer overlapped a prove on its device"
    # both devices did work, and every device is idle now
    workers = {p["worker"] for job_id, _, _ in jobs for p in c.store.list_partitions(job_id)}
    assert workers == {f"{HOST}:dev0", f"{HOST}:dev1"}
    for dev in ("dev0", "dev1"):
        assert c.store.get_worker(f"{HOST}:{dev}")["state"] == "idle"
    # the client's idempotency
    rid = "e2e-idem"
    a = c.client.submit("mulchain", [{"input": _input("mulchain")}], request_id=rid)
    b = c.client.submit("mulchain", [{"input": _input("mulchain")}], request_id=rid)
    assert a == b
    _assert_valid(c.client.wait(a, timeout=30), "mulchain", 1)


def test_bad_inputs_fail_their_job_with_a_clear_message(cluster):
    from cuzk_tasks.client import Client
    from cuzk_tasks.errors import CuzkError, JobError

    c = cluster
    good = c.client.submit("poseidon", [{"input": _input("poseidon")}] * 2)
    def job_hashes():
        return {k for k in c.store.redis.keys(c.store.keys.job("*")) if ":" not in k[-33:]}

    jobs_before = job_hashes()
    # refused at submit, nothing created: by name through cuzk.submit (the client does not
    # know the circuit; a worker refuses it and .get() raises), and in the client itself
    with pytest.raises(CuzkError, match=r"^circuit: unknown circuit 'nope' \(known circuits: "):
        c.client.submit("nope", [{"input": {"a": "1"}}])
    with pytest.raises(CuzkError, match=r"^partition 0: input is \d+ bytes, over the inline limit"):
        c.client.submit("mulchain", [{"input": {"a": "3", "b": "1" * (2 * INLINE_LIMIT)}}])
    # inputs that do not fit the circuit: the CPU worker knows its input map (read at start)
    by_name = Client(settings=c.settings.replace(circuits={}))
    with pytest.raises(CuzkError, match=r"^partition 1: input: signal 'c' is not an input of "
                                        r"circuit 'mulchain' \(its inputs, with their number "
                                        r"of values: a \(1\), b \(1\)\)$"):
        by_name.submit("mulchain", [{"input": _input("mulchain")}, {"input": {"a": "3", "c": "1"}}])
    assert job_hashes() == jobs_before
    bad = {
        "nVars=520": c.client.submit("poseidon", [{"witness_ref": str(FIX / "mulchain" / "witness.wtns")}]),
        "malformed": c.client.submit("mulchain", [{"input": "{not json"}]),
        "assert": c.client.submit("assert_fail", [{"input": _input("assert_fail")}]),
    }
    bad_input = json.loads((FIX / "assert_fail" / "input_bad.json").read_text())
    bad["assert_fail"] = c.client.submit("assert_fail", [{"input": bad_input}])
    del bad["assert"]  # the good assert_fail input must prove
    for needle, job_id in bad.items():
        with pytest.raises(JobError) as info:
            c.client.wait(job_id, timeout=30)
        assert info.value.state == "failed", c.logs()
        assert needle.lower() in str(info.value).lower(), str(info.value)
    _assert_valid(c.client.wait(good, timeout=30), "poseidon", 2)

    # a pickle message is refused by the workers: no job is created from it
    c.client.app.send_task("cuzk.submit", kwargs={"circuit": "mulchain", "partitions": [{"input": {}}],
                                                  "request_id": "pickled"},
                           serializer="pickle", queue=c.settings.cpu_queue)
    time.sleep(1.0)
    from cuzk_tasks.state.keys import Keys

    assert c.store.redis.get(Keys(c.settings.prefix).request("pickled")) is None
    assert c.procs["cpu"].poll() is None


def test_a_poison_message_by_name_is_refused_once_and_the_worker_lives_on(cluster):
    """Issue 24: a by-name submit whose input nests 500 lists deep once killed the CPU
    worker's MAIN process (RecursionError pickling it for the pool); its message went back on
    the queue and killed the next worker too.  Now the main process refuses it before the
    pool: the caller's ``.get()`` raises with the reason naming the field, the refusal is
    recorded, the message is on no queue and unacked nowhere -- not even after the
    sweeper's request leases had time to put it back -- and the next job proves.  A stage
    task sent by name with a deep argument is refused the same way, and so is a body nested
    too deep for the JSON decoder (which Celery drops)."""
    from celery import Celery

    from cuzk_tasks.service.queues import queue_keys
    from cuzk_tasks.service.task_names import TASK_SUBMIT, TASK_SYNTHESIZE

    c = cluster
    cpu = c.procs["cpu"]
    app = Celery("caller", broker=c.settings.broker_url, backend=c.settings.result_backend,
                 set_as_current=False)
    deep = "1"
    for _ in range(500):
        deep = [deep]
    seen = {r["task_id"] for r in c.store.rejected_requests()}
    reply = app.send_task(TASK_SUBMIT, queue=c.settings.cpu_queue, kwargs={
        "circuit": "mulchain", "partitions": [{"input": {"a": deep, "b": "11"}}]})
    with pytest.raises(Exception) as info:
        reply.get(timeout=60)
    assert "cuzk.submit: partition 0: input: nested more than 32 levels deep" in str(info.value), \
        f"{info.value!r}\n{c.logs()}"
    stage = app.send_task(TASK_SYNTHESIZE, queue=c.settings.cpu_queue, args=["nojob", 0, deep],
                          ignore_result=True)  # a stage task stores none: nothing to wait on
    # too deep even for the JSON decoder (no Celery app can send it: pushed raw)
    raw_reply = app.send_task(TASK_SUBMIT, queue="e2e-scratch", kwargs={})
    envelope = json.loads(c.store.redis.rpop("e2e-scratch"))
    envelope["body"] = base64.b64encode(
        ('[[], {"circuit": "mulchain", "partitions": ' + "[" * 100_000 + "]" * 100_000
         + '}, {}]').encode()).decode()
    c.store.redis.lpush(c.settings.cpu_queue, json.dumps(envelope))
    with pytest.raises(Exception) as info:
        raw_reply.get(timeout=60)
    assert "cuzk.submit: the message's body cannot be decoded" in str(info.value), c.logs()
    deadline = time.monotonic() + 30
    while {reply.id, stage.id} - {r["task_id"] for r in c.store.rejected_requests()}:
        assert time.monotonic() < deadline, "the stage message was not refused\n" + c.logs()
        time.sleep(0.1)
    new = [r for r in c.store.rejected_requests() if r["task_id"] not in seen]
    assert sorted(r["task"] for r in new) == [TASK_SUBMIT, TASK_SUBMIT, TASK_SYNTHESIZE], new
    assert "argument 2: nested more than" in next(r["reason"] for r in new
                                                  if r["task"] == TASK_SYNTHESIZE)
    # longer than two sweeps a heartbeat TTL apart: a message held by no one would be back
    time.sleep(2 * HB_TTL + 4 * HB_INTERVAL)
    assert cpu.poll() is None, "the CPU worker died\n" + c.logs()
    ids = {reply.id, stage.id, raw_reply.id}
    unacked = [json.loads(raw)[0]["headers"]["id"] for raw in c.store.redis.hvals(UNACKED)]
    queued = [json.loads(raw)["headers"]["id"] for key in queue_keys(c.settings.cpu_queue)
              for raw in c.store.redis.lrange(key, 0, -1)]
    assert not ids & set(unacked + queued), (unacked, queued)
    assert [r["task_id"] for r in c.store.rejected_requests()].count(reply.id) == 1  # once
    log = (c.base / "cpu.log").read_text()
    assert log.count(f"refused cuzk.submit[{reply.id}]") == 1 and "Unrecoverable" not in log
    job = c.client.submit("mulchain", [{"input": _input("mulchain")}])
    _assert_valid(c.client.wait(job, timeout=60), "mulchain", 1)


def test_what_the_previous_release_left_in_the_store_is_proved(cluster):
    """Upgrade (docs/deploy.md, "Upgrading"): the release before named the device stage's
    task ``cuzk.prove_start`` and its partition state ``gpu``.  Partition 0 is left routed
    with a queued ``cuzk.prove_start`` message: this release registers no such task, so its
    device worker discards it (Celery rejects a message of an unregistered task without
    requeueing it).  Partition 1 is left in state ``gpu`` (``t_gpu_start``), its run gone
    with the old worker.  No live worker holds either stage, so the sweeper re-drives both
    (attempt 1) and the job proves: no work is lost."""
    from cuzk_tasks.service.messages import StageMessages
    from cuzk_tasks.service.queues import queue_keys
    from cuzk_tasks.state import PartitionRun

    c = cluster
    store = c.store
    wtns = str(FIX / "mulchain" / "witness.wtns")
    job, _ = store.create_job(None, "mulchain", "test-mul", 5, None, [{"witness_ref": wtns}] * 2)
    legacy = json.loads(StageMessages(c.settings).prove(PartitionRun(job, 0, 0, "mulchain", 5), wtns))
    legacy["task"] = "cuzk.prove_start"  # the previous release's name of cuzk.prove
    for idx, message in ((0, json.dumps(legacy)), (1, "")):
        run = PartitionRun(job, idx, 0)
        assert store.synth_begin(run).ok
        # routed as the previous release's synth_end did; partition 1 without a message
        assert store.synth_end(run, wtns, 1.0, route_circuit="mulchain", message=message).routed.ok
    store.redis.hset(store.keys.part(job, 1), mapping={
        "state": "gpu", "token": f"{job}:1:0:oldrelease", "t_gpu_start": time.time(),
        "deliveries": 1})
    _assert_valid(c.client.wait(job, timeout=90), "mulchain", 2)
    parts = store.list_partitions(job)
    assert [(p["state"], p["attempt"], p["lost_messages"]) for p in parts] == \
        [("done", 1, 1), ("done", 1, 1)], parts
    logs = "".join((c.base / f"{name}.log").read_text(errors="replace") for name in ("dev0", "dev1"))
    assert "Received unregistered task of type 'cuzk.prove_start'" in logs, c.logs()
    waiting = [raw for name in ("dev0", "dev1")
               for key in queue_keys(store.get_worker(f"{HOST}:{name}")["queue"])
               for raw in store.redis.lrange(key, 0, -1)] + store.redis.hvals(UNACKED)
    assert not [raw for raw in waiting if "cuzk.prove_start" in raw], waiting  # discarded


def test_input_refs_outside_the_roots_fail_the_job_unopened(cluster):
    """A submitter cannot make a worker read a file outside allowed_input_roots (issue 10):
    the submit is refused (or, past a submitter with other roots, the job fails) with the
    exact message, nothing from the file shows, the workers go on."""
    from cuzk_tasks.client import Client
    from cuzk_tasks.errors import CuzkError, JobError
    from cuzk_tasks.paths import OUTSIDE

    c = cluster
    outside = c.base / "outside"
    outside.mkdir()
    secret = outside / "secret.json"
    secret.write_text(json.dumps({"api_token": "s3cr3t"}))
    fifo = outside / "fifo.wtns"  # a worker that opened it would block: the job never fails
    os.mkfifo(fifo)
    (c.base / "spool").mkdir(exist_ok=True)
    link = c.base / "spool" / "link.json"  # inside the (always allowed) spool, pointing out
    link.symlink_to(secret)

    def failure(client, job_id):
        with pytest.raises(JobError) as info:
            client.wait(job_id, timeout=30)
        assert info.value.state == "failed", c.logs()
        return str(info.value)

    try:
        # the submitter's check (its settings are the cluster's): refused, nothing created
        with pytest.raises(CuzkError) as info:
            c.client.submit("mulchain", [{"input_ref": "/etc/passwd"}])
        assert str(info.value) == f"partition 0: input_ref /etc/passwd {OUTSIDE}"
        # a submitter with other roots gets past its own check: the workers' check refuses
        loose = Client(settings=c.settings.replace(allowed_input_roots=("/",)))
        refs = [("input_ref", "/etc/passwd"), ("input_ref", secret), ("input_ref", link),
                ("input_ref", f"{FIX}/../../../etc/passwd"), ("witness_ref", "/etc/passwd"),
                ("witness_ref", fifo)]
        jobs = [(field, ref, loose.submit("mulchain", [{field: str(ref)}])) for field, ref in refs]
        for field, ref, job in jobs:
            message = failure(loose, job)
            assert message == f"job {job} failed: partition 0: {field} {ref} {OUTSIDE}", c.logs()
            for leaked in ("api_token", "s3cr3t", "root:x", "found"):
                assert leaked not in message
        assert all(c.store.get_partition(job, 0)["t_synth_start"] for _, _, job in jobs)
        # a following good job (refs inside the roots) still proves
        good = c.client.submit("mulchain", [{"input_ref": str(FIX / "mulchain" / "input.json")},
                                            {"witness_ref": str(FIX / "mulchain" / "witness.wtns")}])
        _assert_valid(c.client.wait(good, timeout=60), "mulchain", 2)
        assert all(proc.poll() is None for proc in c.procs.values())
    finally:
        try:  # unblock a reader, had one opened the FIFO
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_fifo_and_directory_inputs_inside_the_roots_fail_at_once(cluster):
    """Inside the roots only regular files are opened (issue 24): a FIFO as input_ref or
    witness_ref fails its job at once instead of blocking a worker process until the soft
    limit, a directory fails with a message naming the field, a too-long name is refused at
    submit, and the workers go on to prove the next job."""
    from cuzk_tasks.errors import CuzkError, JobError

    c = cluster
    spool = c.base / "spool"  # always an input root
    spool.mkdir(exist_ok=True)
    fifos = [spool / "fifo-in.json", spool / "fifo-w.wtns"]
    for fifo in fifos:
        os.mkfifo(fifo)
    long_name = spool / ("n" * 300)
    cases = [("input_ref", fifos[0], "is a FIFO: expected a regular file"),
             ("witness_ref", fifos[1], "is a FIFO: expected a regular file"),
             ("input_ref", spool, "is a directory: expected a regular file")]
    try:
        with pytest.raises(CuzkError) as info:  # the name alone says it cannot be opened
            c.client.submit("mulchain", [{"witness_ref": str(long_name)}])
        message = str(info.value)
        assert message.startswith(f"partition 0: witness_ref {str(long_name)[:100]}"), message
        assert "file name too long" in message, message
        t0 = time.monotonic()
        jobs = [(field, path, expected, c.client.submit("mulchain", [{field: str(path)}]))
                for field, path, expected in cases]
        for field, path, expected, job in jobs:
            with pytest.raises(JobError) as info:
                c.client.wait(job, timeout=30)
            assert info.value.state == "failed", c.logs()
            message = str(info.value)
            assert f"partition 0: {field} {str(path)[:100]}" in message, message
            assert expected in message and "internal error" not in message, message
        assert time.monotonic() - t0 < 30
        good = c.client.submit("mulchain", [{"input_ref": str(FIX / "mulchain" / "input.json")}])
        _assert_valid(c.client.wait(good, timeout=60), "mulchain", 1)
        assert all(proc.poll() is None for proc in c.procs.values())
    finally:
        for fifo in fifos:  # unblock a reader, had one opened the FIFO
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


def test_poison_pill_is_retried_at_most_n_times(cluster):
    from cuzk_tasks.errors import JobError

    c = cluster
    poison = c.client.submit("poison_test", [{"input": _input("mulchain")}])
    good = c.client.submit("mulchain", [{"input": _input("mulchain")}] * 2)
    with pytest.raises(JobError) as info:
        c.client.wait(poison, timeout=60)
    assert "poison" in str(info.value)
    part = c.store.get_partition(poison, 0)
    assert int(part["deliveries"]) == MAX_DELIVERIES + 1  # N runs, the next delivery is refused
    _assert_valid(c.client.wait(good, timeout=30), "mulchain", 2)
    # and the message is gone: the refused delivery never ran its compute (a redelivered
    # prove reads prove_begin first), so no process died of it after the N runs
    time.sleep(3)
    deaths = sum(path.read_text().count(f"{instruments.POISON_CIRCUIT_ENV}=poison_test")
                 for path in c.base.glob("dev*.log"))
    assert deaths == MAX_DELIVERIES, f"{deaths} deaths\n{c.logs()}"
    # the workers go on with other jobs
    after = c.client.submit("poseidon", [{"input": _input("poseidon")}] * 2)
    _assert_valid(c.client.wait(after, timeout=30), "poseidon", 2)
    for dev in ("dev0", "dev1"):
        assert c.procs[dev].poll() is None
        assert c.store.get_worker(f"{HOST}:{dev}")["state"] in ("idle", "proving")


def _nice(pid):
    """The nice value of the main thread of process ``pid``."""
    return int(_stat_fields(pathlib.Path(f"/proc/{pid}/task/{pid}/stat"))[16])  # field 19


def _can_raise_priority_to(nice):
    """Whether a process of this user may lower its nice value to ``nice``: CAP_SYS_NICE,
    or an RLIMIT_NICE that reaches it (setpriority(2))."""
    import resource

    status = pathlib.Path("/proc/self/status").read_text()
    effective = int(next(line.split()[1] for line in status.splitlines()
                         if line.startswith("CapEff:")), 16)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NICE)
    return bool(effective & (1 << 23)) or (  # CAP_SYS_NICE
        soft == resource.RLIM_INFINITY or 20 - soft <= nice)


def test_a_device_worker_leaves_the_core_to_its_pool_process(cluster):
    """The main thread of a device worker runs below its pool process
    (defaults.DEVICE_PARENT_NICE), and a pool process forked after that -- a crash's
    replacement -- takes its predecessor's priority back where the OS allows it."""
    from cuzk_tasks.settings import defaults

    c = cluster
    main = c.procs["dev1"].pid
    deadline = time.monotonic() + 20  # the pool forks a moment after the registration
    while not _children(main) and time.monotonic() < deadline:
        time.sleep(0.1)
    (pool,) = _children(main)
    base = _nice(pool)
    want = max(base, defaults.DEVICE_PARENT_NICE)
    while _nice(main) != want and time.monotonic() < deadline:  # then worker_ready
        time.sleep(0.1)
    assert want > base and _nice(main) == want, f"main thread at {_nice(main)}, pool at {base}"
    os.kill(pool, signal.SIGKILL)
    log = c.base / "dev1.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fresh = [pid for pid in _children(main) if pid != pool]
        if fresh and f"ready in pool process {fresh[0]}" in log.read_text(errors="replace"):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"no new pool process\n{c.logs()}")
    if _can_raise_priority_to(base):
        assert _nice(fresh[0]) == base
    else:
        assert _nice(fresh[0]) == want
        assert f"pool process {fresh[0]} runs at nice {want}" in log.read_text(errors="replace")
    job = c.client.submit("mulchain", [{"input": _input("mulchain")}] * 2)
    _assert_valid(c.client.wait(job, timeout=30), "mulchain", 2)


def test_cli_submit_status_cancel(cluster):
    from cuzk_tasks.errors import JobError

    c = cluster
    run = lambda *args: subprocess.run([sys.executable, "-m", "cuzk_tasks", *args], cwd=ROOT,
                                       env=c.env, capture_output=True, text=True, timeout=60)
    out = c.base / "cli-result.json"
    r = run("submit", "poseidon", str(FIX / "poseidon" / "input.json"), "--wait", "--timeout", "30",
            "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "1/1 done" in r.stderr
    _assert_valid(json.loads(out.read_text()), "poseidon", 1)
    r = run("status")
    assert r.returncode == 0, r.stderr
    assert f"{HOST}:dev0" in r.stdout and "cuzk.cpu" in r.stdout and "WORKERS" in r.stdout
    # cancel a job whose partitions are still in (slow) prove
    job = c.client.submit("slow_test", [{"input": _input("mulchain")}] * 2)
    r = run("cancel", job)
    assert r.returncode == 0, r.stderr
    with pytest.raises(JobError) as info:
        c.client.wait(job, timeout=10)
    assert info.value.state == "cancelled"
    # the devices are free again once the cancelled prove messages end
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = [c.store.get_worker(f"{HOST}:{d}")["state"] for d in ("dev0", "dev1")]
        if states == ["idle", "idle"]:
            break
        time.sleep(0.1)
    assert states == ["idle", "idle"]


@pytest.mark.chaos
def test_kill_device_worker_mid_prove_redelivers_to_the_other(cluster):
    c = cluster
    job = c.client.submit("slow_test", [{"input": _input("mulchain")}])
    deadline = time.monotonic() + 20
    victim = None
    while time.monotonic() < deadline:
        part = c.store.get_partition(job, 0)
        if part["state"] == "proving" and part.get("worker"):
            victim = part["worker"]
            break
        time.sleep(0.02)
    assert victim, f"partition never reached prove: {part}\n{c.logs()}"
    name = victim.rsplit(":", 1)[1]
    os.killpg(c.procs[name].pid, signal.SIGKILL)
    c.procs[name].wait(5)
    result = c.client.wait(job, timeout=40)
    _assert_valid(result, "mulchain", 1)
    part = c.store.get_partition(job, 0)
    assert part["state"] == "done" and int(part["attempt"]) == 1
    assert part["worker"] != victim
    # the dead worker is reported offline once its heartbeat expired
    deadline = time.monotonic() + HB_TTL + 3
    while c.store.get_worker(victim)["state"] != "offline" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.store.get_worker(victim)["state"] == "offline"
    # the remaining device still serves jobs
    after = c.client.submit("mulchain", [{"input": _input("mulchain")}] * 2)
    _assert_valid(c.client.wait(after, timeout=30), "mulchain", 2)


def test_a_job_past_its_deadline_fails_and_no_worker_proves_the_rest(cluster):
    """deadline_s at submit (issue 11): past it the job fails "deadline exceeded (...)", the
    partitions not yet started are never proved, and the workers go on with other jobs.
    (Its circuit has no finished partition, so nothing is estimated and the deadline is
    admitted; one the estimate says cannot be met is refused at submit: issue 49.)"""
    from cuzk_tasks.errors import DeadlineRefused, JobError

    c = cluster
    job = c.client.submit("deadline_test", [{"input": _input("mulchain")}] * 6, deadline_s=1.5)
    with pytest.raises(JobError, match=r"deadline exceeded \(1.5 s after submit; 0 of 6"):
        c.client.wait(job, timeout=30)
    parts = c.store.list_partitions(job)
    assert {p["state"] for p in parts} == {"cancelled"}, parts
    # only what was in prove at the deadline (one per device) ever started
    time.sleep(3)  # the in-flight proves end (2.5 s each) and must not start another
    started = [p for p in c.store.list_partitions(job) if p.get("t_prove_start")]
    assert len(started) <= 2, started
    assert all(w["state"] != "proving" for w in c.store.live_device_workers())
    after = c.client.submit("mulchain", [{"input": _input("mulchain")}])
    _assert_valid(c.client.wait(after, timeout=30), "mulchain", 1)
    # mulchain has finished partitions now: a deadline half its estimate misses is refused
    with pytest.raises(DeadlineRefused, match=r"^deadline_s: 0.001 s cannot be met: the job "
                                              r"would be done in about [\d.]+ s"):
        c.client.submit("mulchain", [{"input": _input("mulchain")}], deadline_s=0.001)


def _delivered_stage(store, job, n, stage):
    """A partition of ``job`` whose ``stage`` message the CPU worker has taken: synthesize
    running (state synthesizing), or finalize popped into kombu's unacked hash."""
    from cuzk_tasks.service.task_names import stage_partition

    if stage == "synthesizing":  # milliseconds: every state in one round trip, at once
        pipe = store.redis.pipeline(transaction=False)
        for idx in range(n):
            pipe.hget(store.keys.part(job, idx), "state")
        return next((idx for idx, state in enumerate(pipe.execute()) if state == stage), None)
    for idx in range(n):
        part = store.get_partition(job, idx) or {}
        if part.get("state") != stage:
            continue
        for raw in store.redis.hvals(UNACKED):
            task, args, kwargs, _ = decode(json.dumps(json.loads(raw)[0]))
            found = stage_partition(task, args, kwargs)
            if task == "cuzk.finalize" and found and (found.job_id, found.idx) == (job, idx):
                return idx
    return None


def _past_stage(store, job, n, stage):
    """Whether every partition of ``job`` is past ``stage`` (no look can see it there now)."""
    order = ["pending", "synthesizing", "synth_done", "proving", "finalizing", "done"]
    pipe = store.redis.pipeline(transaction=False)
    for idx in range(n):
        pipe.hget(store.keys.part(job, idx), "state")
    return all(state not in order or order.index(state) > order.index(stage)
               for state in pipe.execute())


def _kill_cpu_worker_mid(c, stage, n, tries=8):
    """Submit ``n`` partitions and kill -9 the CPU worker's process group while it runs
    ``stage``; restart it.  Returns (job, stranded partitions, when restarted, jobs
    submitted).  A stage that ended between the look and the kill (synthesize takes
    milliseconds) is tried again."""
    for attempt in range(tries):
        job = c.client.submit("mulchain", [{"input": _input("mulchain")}] * n)
        deadline, victim = time.monotonic() + 30, None
        while victim is None and time.monotonic() < deadline:
            victim = _delivered_stage(c.store, job, n, stage)
            if victim is None and _past_stage(c.store, job, n, stage):
                break  # every partition went through the stage between two looks: try again
            if stage != "synthesizing":  # a synthesize is over in a millisecond or two
                time.sleep(0.002)
        if victim is None:
            assert time.monotonic() < deadline, \
                f"no partition reached {stage} in 30 s\n{c.logs()}"
            c.client.wait(job, timeout=60)
            continue
        os.killpg(c.procs["cpu"].pid, signal.SIGKILL)
        c.procs["cpu"].wait(5)
        stranded = [i for i, p in enumerate(c.store.list_partitions(job)) if p["state"] == stage]
        (c.base / "cpu.log").rename(c.base / f"cpu-killed-{stage}-{attempt}.log")
        restarted = time.monotonic()
        c.start("cpu", "--cpu", "--concurrency", "2")
        if stranded:
            return job, stranded, restarted, attempt + 1
        c.client.wait(job, timeout=60)
    pytest.fail(f"the {stage} stage ended before the kill in {tries} tries")


@pytest.mark.chaos
@pytest.mark.parametrize("stage", ["synthesizing", "finalizing"])
def test_kill_the_whole_cpu_worker_mid_stage_and_every_partition_gets_one_proof(cluster, stage):
    """kill -9 of the CPU worker's process group (what the OOM killer or a lost host does)
    while it runs a stage: the stage's message is stranded in kombu's unacked hash until the
    visibility timeout.  The restarted worker's sweeper finds the stage held by no live
    worker (no lease) and re-drives it: the job completes within 2 x the heartbeat TTL plus
    its work, with exactly one proof per partition."""
    c, n = cluster, (12 if stage == "synthesizing" else 6)  # more synthesizes: a wider window
    completed_before = sum(v for k, v in c.store.snapshot()["counters"].items()
                           if k.startswith("completed:"))
    job, stranded, restarted, submitted = _kill_cpu_worker_mid(c, stage, n)
    result = c.client.wait(job, timeout=60)
    took = time.monotonic() - restarted
    _assert_valid(result, "mulchain", n)
    parts = c.store.list_partitions(job)
    assert [p["state"] for p in parts] == ["done"] * n
    for idx in stranded:
        assert parts[idx]["attempt"] >= 1 and parts[idx]["lost_messages"] >= 1, parts[idx]
    # one completion per partition (of this job, and of any job the retries submitted)
    completed = sum(v for k, v in c.store.snapshot()["counters"].items()
                    if k.startswith("completed:"))
    assert completed - completed_before == n * submitted
    assert len(c.store.get_result(job)["proofs"]) == n
    # the bound: the restarted worker's start-up, 2 x the heartbeat TTL, and the work itself
    print(f"{stage}: {len(stranded)} stranded partition(s), job done {took:.1f} s after the "
          f"restart ({submitted} tries)")
    assert took < 2 * HB_TTL + 20, f"took {took:.1f} s after the restart\n{c.logs()}"


def _stat_fields(stat):
    """The fields of a proc(5) ``stat`` file after the command name (field 3 on)."""
    return stat.read_text().rsplit(")", 1)[1].split()


def _children(pid):
    """Pids of the processes whose parent is ``pid`` (the Celery worker's pool)."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = _stat_fields(stat)
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.chaos
def test_kill_the_whole_cpu_worker_holding_a_submit_by_name(cluster):
    """A by-name submit (``send_task("cuzk.submit")``, as a service without this package's
    registry sends it) names no partition, so no stage lease covers it.  The CPU worker
    takes it -- the message enters kombu's unacked hash -- and is killed -9 at once, before
    its request lane has acknowledged it (the kill is tried again, on a fresh worker, if the
    lane was quicker).  The restarted worker's sweeper finds the request held by no live
    worker and puts it back on its queue: the caller's reply comes within 2 x the heartbeat
    TTL plus the restart, not after the visibility timeout (an hour), and the job completes
    with one proof each -- one job, whether or not the killed worker had created it."""
    from celery import Celery

    from cuzk_tasks.service.task_names import TASK_SUBMIT

    c, n = cluster, 3
    app = Celery("caller", broker=c.settings.broker_url, backend=c.settings.result_backend,
                 set_as_current=False)

    def unacked_ids():
        return {json.loads(raw)[0]["headers"]["id"] for raw in c.store.redis.hvals(UNACKED)}

    def ready_worker():
        cpu = c.procs["cpu"]
        deadline = time.monotonic() + 30
        while "ready." not in (c.base / "cpu.log").read_text():
            assert time.monotonic() < deadline, f"the CPU worker is not up\n{c.logs()}"
            time.sleep(0.1)
        return cpu

    for attempt in range(5):
        cpu = ready_worker()
        reply = app.send_task(TASK_SUBMIT, queue=c.settings.cpu_queue, kwargs={
            "circuit": "mulchain", "partitions": [{"input": _input("mulchain")}] * n})
        deadline = time.monotonic() + 20
        while reply.id not in unacked_ids():
            assert time.monotonic() < deadline, "the CPU worker never took the submit\n" + c.logs()
        os.killpg(cpu.pid, signal.SIGKILL)
        cpu.wait(5)
        (c.base / "cpu.log").rename(c.base / f"cpu-killed-submit-{attempt}.log")
        restarted = time.monotonic()
        c.start("cpu", "--cpu", "--concurrency", "2")
        if reply.id in unacked_ids():  # the kill landed before the ack: the lease's case
            break
    else:
        pytest.fail("the request lane acknowledged the submit before every kill")
    job_id = reply.get(timeout=60)
    took = time.monotonic() - restarted
    print(f"by-name submit: reply {took:.1f} s after the restart")
    assert took < 2 * HB_TTL + 20, c.logs()
    assert "put back on its queue" in (c.base / "cpu.log").read_text()
    job = c.store.get_job(job_id)
    assert job["request_id"] == f"celery:{reply.id}"
    _assert_valid(c.client.wait(job_id, timeout=60), "mulchain", n)
    # idempotent: the same request delivered again returns that job and creates nothing
    again = app.send_task(TASK_SUBMIT, queue=c.settings.cpu_queue, task_id=reply.id,
                          kwargs={"circuit": "mulchain",
                                  "partitions": [{"input": _input("mulchain")}] * n})
    assert again.get(timeout=30) == job_id


def test_a_bls12_381_circuit_proves_through_the_same_workers(cluster):
    """A registry circuit compiled with circom --prime bls12381 (issue 12): the same workers
    synthesize, prove and finalize it; every proof verifies against snarkjs's key; the job
    and the status read name its curve."""
    c = cluster
    d = FIX / "bls12381" / "mulchain"
    inputs = json.loads((d / "input.json").read_text())
    job = c.client.submit("bls_mulchain", [{"input": inputs}] * 3)
    bn = c.client.submit("mulchain", [{"input": _input("mulchain")}])
    result = c.client.wait(job, timeout=60)
    _assert_valid(result, "bls12381/mulchain", 3)
    assert all(item["proof"]["curve"] == "bls12381" for item in result["proofs"])
    c.client.wait(bn, timeout=60)
    assert c.store.get_job(job)["curve"] == "bls12381"
    assert c.store.get_job(bn)["curve"] == "bn128"
    recent = {j["id"]: j for j in c.store.snapshot()["recent_jobs"]}
    assert recent[job]["curve"] == "bls12381"
