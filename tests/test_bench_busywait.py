"""The bench prover's device log (bench/busywait.py) and the hand-over bench/pipeline.py
takes from it: the device's own clock, not the state store's stamps."""

import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def bench_modules(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import busywait
    import pipeline

    yield busywait, pipeline
    for name in ("busywait", "pipeline"):
        sys.modules.pop(name, None)


def test_each_compute_is_logged_and_the_gaps_between_them_are_the_hand_overs(
        tmp_path, monkeypatch, bench_modules):
    busywait, pipeline = bench_modules
    monkeypatch.setenv(busywait.ENV, "20,0,sleep")
    monkeypatch.setenv(busywait.DEVICE_LOG_ENV, str(tmp_path))
    prover = busywait.BusyWaitProver(ctx=None)
    before = time.time()
    for pause_s in (0.05, 0.3, 0.0):
        prover.prove_start("c", "w")
        time.sleep(pause_s)  # the host's hand-over: the device waits this long
    [log] = list(tmp_path.glob("device-*.log"))
    spans = busywait.read_device_log(log)
    # the third compute's line is written by a fourth one: two lines
    assert len(spans) == 2
    for start, end in spans:
        assert start >= before and end - start >= 0.019  # T = 20 ms
    gaps = pipeline.device_handovers(tmp_path, since=before)
    assert len(gaps) == 1
    assert 50.0 <= gaps[0] < 250.0  # the first pause (ms), not the second
    assert pipeline.device_handovers(tmp_path, since=time.time()) == []  # none begun after


def test_no_log_without_the_directory(tmp_path, monkeypatch, bench_modules):
    busywait, _ = bench_modules
    monkeypatch.setenv(busywait.ENV, "1,0,sleep")
    monkeypatch.delenv(busywait.DEVICE_LOG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    prover = busywait.BusyWaitProver(ctx=None)
    for _ in range(3):
        prover.prove_start("c", "w")
    assert list(tmp_path.iterdir()) == []
