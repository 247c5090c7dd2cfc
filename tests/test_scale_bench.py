"""bench/scale.py, the orchestration's scale benchmark (issue 27 item 7), in its smallest
configuration, so the benchmark cannot rot: one device worker and one CPU worker on one
simulated host against a real redis-server, sleeping stand-ins for the stages' compute."""

import json
import pathlib
import subprocess
import sys

import pytest

from cuzk_tasks.dev.local_redis import find_redis_server

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(find_redis_server() is None, reason="needs redis-server")]


def test_smallest_fleet_reports_every_measure(tmp_path):
    out = tmp_path / "scale.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--fleets", "1x1", "--device-ms", "300",
         "--device-s", "0.6", "--min-partitions", "3", "--idle-s", "2", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "fleet 1x1: T = 300 ms" in result.stderr  # progress on stderr
    assert "| 1x1 | 300 |" in result.stdout  # the tables on stdout
    [fleet] = json.loads(out.read_text())
    [run] = fleet["runs"]
    assert run["partitions"] == 3 and run["devices_used"] == 1
    # three sleeps of 300 ms back to back on one device: the hand-overs are what is lost
    assert 0.5 < run["duty_med"] <= 1.0
    assert run["cmds_per_part"] > 20 and run["cpu_ms_per_part"] > 0
    assert fleet["idle"]["idle_cmds_s_per_worker"] > 0
    sweep = fleet["sweep"]
    assert sweep["in_flight"] == 4  # the backlog: 4 partitions per device, all in flight
    assert sweep["cmds"] > sweep["empty_cmds"] > 0
