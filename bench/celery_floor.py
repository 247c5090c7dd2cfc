#!/usr/bin/env python3
"""BENCH ONLY: what Celery itself costs for the pipeline's three hops, with nothing in them.

The baseline row of ``bench/pipeline.py``.  Three bare tasks take the same path as a
partition -- cpu queue -> device queue -> cpu queue -- on workers configured exactly like
the product's (``cuzk_tasks.celery_app.create_app``, prefork, one process each, the device
worker with ``DEVICE_WORKER_TUNING``, the pool processes traced as the product's when the
``otel`` extra is installed), spending the same T ms of "GPU" and F ms of finalize
time (the ``busy_wait`` instrument) so the processes go just as cold between hops.  Each
task publishes the next with Celery's own ``app.send_task`` (the app's settings: task
events on, as the product's); no state store, no prover.  What is left over T + F is
Celery's floor for a lone partition on this host.

    python bench/celery_floor.py worker cpu|device     (started by bench/pipeline.py)
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuzk_tasks.settings.config import load_settings  # noqa: E402

DONE_KEY = "bench:floor:overhead_ms"
T_SYNTHESIZE, T_PROVE, T_FINALIZE = "bench.floor.synthesize", "bench.floor.prove", "bench.floor.finalize"


def work_ms():
    gpu_ms, finalize_ms = (float(x) for x in os.environ["BENCH_FLOOR_WORK_MS"].split(","))
    return gpu_ms, finalize_ms


def send(app, task, t0, queue):
    """Send the bare task as the product's publisher does (cuzk_tasks/service/publisher.py)."""
    app.send_task(task, (t0,), queue=queue, priority=5, ignore_result=True)


def first_message(app, settings, t0):
    send(app, T_SYNTHESIZE, t0, settings.cpu_queue)


def make_app(settings):
    import redis

    from cuzk_tasks.celery_app import create_app
    from busywait import busy_wait  # bench/busywait.py (this script's directory)

    app = create_app(settings)
    state = {}

    @app.task(name=T_SYNTHESIZE)
    def synthesize(t0):
        send(app, T_PROVE, t0, settings.device_queue(0))

    @app.task(name=T_PROVE)
    def prove(t0):
        busy_wait(work_ms()[0])
        send(app, T_FINALIZE, t0, settings.cpu_queue)

    @app.task(name=T_FINALIZE)
    def finalize(t0):
        gpu_ms, finalize_ms = work_ms()
        busy_wait(finalize_ms)
        overhead_ms = (time.time() - t0) * 1000.0 - gpu_ms - finalize_ms
        client = state.get("redis")
        if client is None:
            client = state["redis"] = redis.Redis.from_url(settings.broker_url)
        client.lpush(DONE_KEY, str(overhead_ms))  # the benchmark's tally, not a task

    return app


def _traced_like_the_product():
    """Each pool process is instrumented as the product's are (cuzk_tasks/service/worker.py
    ``_init_child``): with the ``otel`` extra installed, a span per task run and per publish,
    on both sides of the comparison; without it, on neither."""
    from celery import signals

    from cuzk_tasks.service import tracing

    signals.worker_process_init.connect(lambda **_: tracing.instrument(), weak=False)


def main(argv):
    from cuzk_tasks.service.worker import DEVICE_WORKER_TUNING, run_celery_worker

    if argv[:1] != ["worker"] or argv[1:2] not in (["cpu"], ["device"]):
        raise SystemExit("usage: celery_floor.py worker cpu|device")
    settings = load_settings()
    app = make_app(settings)
    _traced_like_the_product()
    if argv[1] == "device":
        return run_celery_worker(app, settings.device_queue(0), 1, "floor-dev@bench", "WARNING",
                                  **DEVICE_WORKER_TUNING)
    return run_celery_worker(app, settings.cpu_queue, 1, "floor-cpu@bench", "WARNING")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
