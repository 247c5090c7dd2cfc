"""PartitionRun and DeviceResult (cuzk_tasks/state/run.py): one type for a partition's run,
and the device stage's result that finalize's message carries -- JSON both ways, every field
checked on the way in, by name."""

from __future__ import annotations

import json

import pytest

from cuzk_tasks.errors import StateError
from cuzk_tasks.state import DeviceResult, PartitionRun
from cuzk_tasks.state.run import FINALIZE_FIELDS, RunError


def _result(**changes):
    fields = dict(witness_ref="/spool/j/0.wtns", worker="host-gpu0", token="j:0:1:abc",
                  backend="gpu", partial={"a": [1, 2]}, sent_at=10.5, deadline_at=None,
                  prove_ms=3.25)
    fields.update(changes)
    return DeviceResult(PartitionRun("j", 0, 1, "mulchain", 5), **fields)


def test_a_run_round_trips_through_json_and_names_its_attempt():
    run = PartitionRun("j", 3, 2, "mulchain", 7)
    assert PartitionRun.from_json(json.loads(json.dumps(run.to_json()))) == run
    assert run.to_json() == {"job": "j", "idx": 3, "attempt": 2, "circuit": "mulchain",
                             "priority": 7}
    assert run.member == "j:3:2"
    assert run.next_attempt() == PartitionRun("j", 3, 3, "mulchain", 7)
    assert PartitionRun("j", 3) == PartitionRun("j", 3, 0, None, None)  # identity alone


@pytest.mark.parametrize("args, error", [
    (("", 0, 0), "job must be a non-empty string"),
    (("j", -1, 0), "idx must be a non-negative int"),
    (("j", 0, True), "attempt must be a non-negative int"),
    (("j", 0, 0, ""), "circuit must be a non-empty string"),
    (("j", 0, 0, "c", "5"), "priority must be an int"),
])
def test_a_run_is_checked_when_it_is_made(args, error):
    with pytest.raises(RunError, match=error) as info:
        PartitionRun(*args)
    # the store's error for a bad id or index, as it always was; a ValueError for a message
    assert isinstance(info.value, StateError) and isinstance(info.value, ValueError)


def test_a_run_without_its_circuit_or_priority_is_not_sent():
    with pytest.raises(ValueError, match="needs its circuit and priority"):
        PartitionRun("j", 0, 0).to_json()


def test_the_device_result_is_the_finalize_message_prove_always_sent():
    result = _result()
    data = json.loads(json.dumps(result.to_json()))
    assert set(data) == set(FINALIZE_FIELDS) | {"prove_ms"}
    assert DeviceResult.from_json(data) == result
    del data["prove_ms"]  # not read by finalize: may be absent
    assert DeviceResult.from_json(data).prove_ms is None


def test_a_finalize_message_of_the_previous_release_gives_its_device_time_as_gpu_ms():
    """Upgrade (docs/deploy.md, "Upgrading"): a finalize message queued by the release before
    names prove_ms ``gpu_ms``; it is read, not lost."""
    data = _result().to_json()
    data["gpu_ms"] = data.pop("prove_ms")
    assert DeviceResult.from_json(data) == _result()


@pytest.mark.parametrize("field", FINALIZE_FIELDS)
def test_a_finalize_message_without_a_field_names_it(field):
    data = _result().to_json()
    del data[field]
    with pytest.raises(ValueError, match=rf"^finalize message without {field} \("):
        DeviceResult.from_json(data)


@pytest.mark.parametrize("field, value, error", [
    ("idx", "x", "idx must be a non-negative int"),
    ("attempt", -1, "attempt must be a non-negative int"),
    ("priority", None, "priority must be an int"),
    ("circuit", 3, "circuit must be a non-empty string"),
    ("token", None, "token must be a non-empty string"),
    ("witness_ref", "", "witness_ref must be a non-empty string"),
    ("sent_at", "now", "sent_at must be a number of seconds"),
    ("deadline_at", float("nan"), "deadline_at must be a number of seconds or null"),
])
def test_a_finalize_message_with_a_wrong_field_names_it(field, value, error):
    data = _result().to_json()
    data[field] = value
    with pytest.raises(ValueError, match=f"^finalize message: {error}"):
        DeviceResult.from_json(data)
    with pytest.raises(ValueError, match="expected a JSON object"):
        DeviceResult.from_json([data])
