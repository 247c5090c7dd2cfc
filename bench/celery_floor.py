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

The hand-over floors: ``bench.floor.device`` tasks, sent back to back onto the device queue,
compute (T ms, logged by ``busywait.DeviceLog``) and then either publish their finalize (F ms
on the cpu queue, untallied) as a bare Celery pipeline would, or nothing (Celery's step from
one task to the next, nothing else); the last one reports it is done.  The device's wait
between two of them is Celery's own hand-over.

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
DEVICE_DONE_KEY = "bench:floor:device_done"
T_SYNTHESIZE, T_PROVE, T_FINALIZE = "bench.floor.synthesize", "bench.floor.prove", "bench.floor.finalize"
T_DEVICE = "bench.floor.device"
UNTALLIED = 0.0  # a finalize's t0 when it is no lone partition's (the hand-over floor's)


def work_ms():
    """(T ms, F ms) of ``BENCH_FLOOR_WORK_MS="T,F[,sleep]"``."""
    gpu_ms, finalize_ms = (float(x) for x in os.environ["BENCH_FLOOR_WORK_MS"].split(",")[:2])
    return gpu_ms, finalize_ms


def host_sleeps():
    """Whether the "GPU" time blocks the host thread (``sleep``) instead of spinning."""
    return "sleep" in os.environ["BENCH_FLOOR_WORK_MS"].split(",")[2:]


def send(app, task, t0, queue):
    """Send the bare task as the product's publisher does (cuzk_tasks/service/publisher.py)."""
    app.send_task(task, (t0,), queue=queue, priority=5, ignore_result=True)


def first_message(app, settings, t0):
    send(app, T_SYNTHESIZE, t0, settings.cpu_queue)


def make_app(settings):
    import redis

    from cuzk_tasks.celery_app import create_app
    from busywait import DeviceLog, busy_wait  # bench/busywait.py (this script's directory)

    app = create_app(settings)
    state = {}
    device_log = DeviceLog()

    def tally():
        client = state.get("redis")
        if client is None:
            client = state["redis"] = redis.Redis.from_url(settings.broker_url)
        return client

    @app.task(name=T_SYNTHESIZE)
    def synthesize(t0):
        send(app, T_PROVE, t0, settings.device_queue(0))

    @app.task(name=T_PROVE)
    def prove(t0):
        device_log.compute(work_ms()[0], host_sleeps())
        send(app, T_FINALIZE, t0, settings.cpu_queue)

    @app.task(name=T_DEVICE)
    def device(last, publish):
        device_log.compute(work_ms()[0], host_sleeps())
        if publish:
            send(app, T_FINALIZE, UNTALLIED, settings.cpu_queue)
        if last:
            tally().lpush(DEVICE_DONE_KEY, "1")

    @app.task(name=T_FINALIZE)
    def finalize(t0):
        gpu_ms, finalize_ms = work_ms()
        busy_wait(finalize_ms)
        if t0 == UNTALLIED:
            return
        overhead_ms = (time.time() - t0) * 1000.0 - gpu_ms - finalize_ms
        tally().lpush(DONE_KEY, str(overhead_ms))  # the benchmark's tally, not a task

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
