#!/usr/bin/env python3
"""Benchmark one synthesize with its input carried in the message against the same
synthesize reading its input from synth_begin's reply (the code before), in one process.

Carried (``defaults.CARRIED_INPUT_BYTES``): synth_begin is sent unread and the witness is
computed while it is on the wire.  Read: synth_begin's round trip, then the witness.  Both
call ``pipeline.synthesize`` as the Celery task does, on a real redis-server (``LocalRedis``)
and the mulchain fixture, alternating the two per partition so that both see the same
machine; each call is timed whole (synth_begin, witness, spool write, synth_end with its
route and the prove message's publish).

    python bench/synth_overlap.py [--rounds 400]
"""

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuzk_tasks import pipeline  # noqa: E402
from cuzk_tasks.celery_app import create_app  # noqa: E402
from cuzk_tasks.dev.local_redis import LocalRedis  # noqa: E402
from cuzk_tasks.settings.config import load_settings  # noqa: E402
from cuzk_tasks.state import PartitionRun  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "mulchain"


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=400, help="partitions per mode (default 400)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalRedis() as redis:
        workdir = pathlib.Path(tmp)
        config = workdir / "cuzk.toml"
        config.write_text(
            f'redis_url = "{redis.url}"\nprefix = "synthbench"\n'
            f'spool_dir = "{workdir / "spool"}"\n\n'
            f'[circuits.mulchain]\nkind = "bench"\nzkey = "{FIXTURE / "circuit.zkey"}"\n'
            f'wasm = "{FIXTURE / "circuit.wasm"}"\n')
        settings = load_settings(config, env={})
        app = create_app(settings)
        ctx = pipeline.Context(app, settings, pipeline.WorkerIdentity(
            settings.cpu_worker_id(), "cpu", "cpu"))
        device = settings.device_worker_id(0)
        ctx.store.register_worker(device, "device", settings.hostname, device=0,
                                  queue=settings.device_queue(0))
        ctx.store.heartbeat(device, 3600)
        inputs = json.loads((FIXTURE / "input.json").read_text())
        times = {"carried": [], "read": []}
        warmup = 20
        for i in range(args.rounds + warmup):
            for mode in (("carried", "read") if i % 2 else ("read", "carried")):
                job = pipeline.submit_job(ctx, "mulchain", [{"input": inputs}])
                text = ctx.store.get_partition(job, 0)["input"]
                t0 = time.perf_counter()
                pipeline.synthesize(ctx, PartitionRun(job, 0, 0, "mulchain", 5),
                                    text if mode == "carried" else None)
                if i >= warmup:
                    times[mode].append((time.perf_counter() - t0) * 1e3)
                ctx.store.cancel_job(job)  # its prove message is dropped with it
            if i and i % 100 == 0:
                print(f"  {i}/{args.rounds + warmup}", file=sys.stderr)
        print("| synthesize | p50 ms | p10 ms | p90 ms | n |")
        print("|---|---:|---:|---:|---:|")
        for mode, label in (("read", "input read from synth_begin's reply (baseline)"),
                            ("carried", "input carried, synth_begin sent unread")):
            v = times[mode]
            print(f"| {label} | {statistics.median(v):.3f} | {percentile(v, 0.1):.3f} | "
                  f"{percentile(v, 0.9):.3f} | {len(v)} |")
        saved = statistics.median(times["read"]) - statistics.median(times["carried"])
        print(f"carried / read p50: {statistics.median(times['carried']) / statistics.median(times['read']):.2f}x; "
              f"saved {saved:.3f} ms per partition")


if __name__ == "__main__":
    main()
