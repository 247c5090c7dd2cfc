"""Spool hygiene and a full spool disk (issue 24): the sweep of ended jobs' witnesses
(cuzk_tasks/spool.py) on the state store, and synthesize's write into a real full
filesystem (a 64 KiB tmpfs; skipped where this process may not mount one)."""

from __future__ import annotations

import errno
import os
import subprocess
import time
import types
import uuid

import pytest

from cuzk_tasks.errors import SpoolFullError
from cuzk_tasks.spool import sweep_spool


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
    assert store.fail_partition(failed, 0, 0, "bad input")
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
    assert sweep_spool(store, str(tmp_path), retention_s=0) == 0  # 0 = keep for ever
    assert sweep_spool(store, str(tmp_path), retention_s=3600) == 2
    assert not d.exists()
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
    assert str(e.value).startswith(f"spool disk full ({tiny_fs}): no room for a witness of "
                                   "3000 bytes for ")
    assert not target.exists() and not any(p.name.startswith("0.wtns") for p in
                                           tiny_fs.rglob("*"))  # no temporary left


def test_room_made_while_waiting_lets_the_write_through(tiny_fs):
    import threading

    from cuzk_tasks.pipeline.synthesize import _write_spooled

    target = tiny_fs / "0.wtns"
    threading.Timer(1.5, os.unlink, args=(tiny_fs / ".filler",)).start()
    _write_spooled(_ctx(tiny_fs), str(target), b"w" * 3000, wait_s=30)
    assert target.read_bytes() == b"w" * 3000


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path):
    from cuzk_tasks.pipeline.synthesize import _write_spooled

    (tmp_path / "file").write_text("")
    with pytest.raises(OSError) as e:  # a directory where a file is: not an outage
        _write_spooled(_ctx(tmp_path), str(tmp_path / "file" / "0.wtns"), b"w", wait_s=30)
    assert not isinstance(e.value, SpoolFullError)
