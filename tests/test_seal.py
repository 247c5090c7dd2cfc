"""cuzk_tasks/service/seal.py: sealing and checking stage messages, the stage key file, and
the refusal at start of a worker whose key is not the live workers'.  The forged messages of
a real stack: tests/test_forged_messages.py."""

from __future__ import annotations

import json
import os
import stat

import pytest

from cuzk_tasks.errors import ConfigError
from cuzk_tasks.service.messages import StageMessages
from cuzk_tasks.service.seal import StageSeal, check_peers
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.state import PartitionRun

KEY = bytes(range(32))


def test_a_sealed_message_checks_as_the_broker_carries_it_and_any_change_is_refused():
    seal = StageSeal(KEY)
    args, kwargs = ("job", 0, 0, "mulchain", "/spool/job/0.wtns"), {"priority": 5}
    sealed = dict(kwargs, seal=seal.seal("cuzk.prove", args, kwargs))
    # the broker's JSON: tuples come back as lists
    back = json.loads(json.dumps([list(args), sealed]))
    assert seal.problem("cuzk.prove", *back) is None
    changed = [("cuzk.prove", ["job", 0, 0, "mulchain", "/inputs/evil.wtns"], sealed),
               ("cuzk.prove", list(args), dict(sealed, priority=0)),
               ("cuzk.synthesize", list(args), sealed),  # the seal names its task
               ("cuzk.prove", list(args), kwargs)]       # none at all
    for task, a, k in changed:
        problem = seal.problem(task, a, k)
        assert problem and problem.startswith(f"{task}: the message") and "evil" not in problem
    assert StageSeal(bytes(32)).problem("cuzk.prove", *back)  # another key


def test_stage_messages_seal_what_they_build(tmp_path):
    settings = load_settings(env={"CUZK_STAGE_KEY_FILE": str(tmp_path / "k")})
    messages = StageMessages(settings)
    entry = json.loads(messages.prove(PartitionRun("j", 1, 2, "c", 3), "/w"))
    assert messages.seal.problem("cuzk.prove", entry["args"], entry["kwargs"]) is None


def test_the_key_file_is_made_once_private_and_read_back(tmp_path):
    path = tmp_path / "keys" / "stage.key"
    assert StageSeal.load(str(path), create=False) is None
    made = StageSeal.load(str(path), create=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert StageSeal.load(str(path), create=True).key_id == made.key_id
    assert os.listdir(path.parent) == ["stage.key"]  # nothing staged is left behind
    assert made.key_id not in path.read_text()  # the id does not reveal the key


def test_a_bad_key_file_is_refused_in_one_line_naming_it(tmp_path):
    path = tmp_path / "stage.key"
    path.write_text("00" * 8)
    with pytest.raises(ConfigError, match=f"stage_key_file {path}: expected 64 hex digits"):
        StageSeal.load(str(path), create=False)
    with pytest.raises(ConfigError, match="cannot create it"):
        StageSeal.load("/proc/cuzk-no-such-dir/stage.key", create=True)


def test_a_worker_with_another_key_than_the_live_workers_is_refused():
    mine, other = StageSeal(KEY), StageSeal(bytes(32))
    workers = [{"worker_id": "h:dev0", "online": True, "stage_key_id": other.key_id},
               {"worker_id": "h:old", "online": False, "stage_key_id": "gone"}]
    with pytest.raises(ConfigError, match=f"stage key {mine.key_id} differs .*{other.key_id}"):
        check_peers(mine, workers)
    check_peers(other, workers)  # the same key: fine; an offline worker's key does not count
    check_peers(mine, [])
