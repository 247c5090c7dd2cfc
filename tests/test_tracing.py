"""OpenTelemetry (the ``otel`` extra): every task is traced, and a job's stages share one trace.

A real Celery worker in this process (``celery.contrib.testing.worker.start_worker``, solo
pool) serving both the CPU queue and a registered device's queue (CPU backend) -- and a CPU
worker's outbox relay, which publishes what the device's steps record -- with the
instrumentation ``cuzk_tasks.service.tracing.instrument`` installs in every pool process, on a real
redis-server; spans go to the SDK's in-memory exporter.  The job is sent the way a
Celery user sends it, ``send_task("cuzk.submit")``.
"""

from __future__ import annotations

import json
import pathlib
import time
import uuid

import pytest

pytest.importorskip("opentelemetry.instrumentation.celery",
                    reason="the otel extra is not installed (pip install '.[otel]')")

from support.processes import write_circuits_toml  # noqa: E402

pytestmark = pytest.mark.slow

FIX = pathlib.Path(__file__).resolve().parent / "fixtures"
STAGES = ("cuzk.submit", "cuzk.synthesize", "cuzk.prove", "cuzk.finalize")


@pytest.fixture
def exporter():
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cuzk_tasks.service import tracing

    memory = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the process's first (set once per process)
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    assert tracing.instrument(environ={})
    try:
        yield memory
    finally:
        CeleryInstrumentor().uninstrument()
        memory.shutdown()


def test_every_stage_of_a_job_is_a_span_of_one_trace(exporter, redis_server_url, tmp_path):
    from celery.contrib.testing.worker import start_worker

    from cuzk_tasks import pipeline
    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.service.publisher import OutboxRelay

    tag = uuid.uuid4().hex[:8]
    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", FIX / "mulchain")})
    settings = load_settings(env={
        "CUZK_CONFIG": str(config), "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": "tr" + tag,
        "CUZK_CPU_QUEUE": "tr.cpu." + tag, "CUZK_HOSTNAME": "tr" + tag,
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_THREADS": "1",
        # one in-process worker consumes the cpu, stage and device queues: cluster-wide stages
        "CUZK_SHARED_SPOOL": "1"})
    device_id, device_queue = settings.device_worker_id(0), settings.device_queue(0)
    app = create_app(settings)
    app.cuzk_identity = pipeline.WorkerIdentity(device_id, "device", "cpu")
    store = pipeline.context(app).store
    store.register_worker(device_id, "device", settings.hostname, device=0, queue=device_queue)
    store.heartbeat(device_id, 300)
    inputs = json.loads((FIX / "mulchain" / "input.json").read_text())
    relay = OutboxRelay(store, app, wait_s=0.2).start()  # a CPU worker's: publishes the device's
    with start_worker(app, queues=[settings.cpu_queue, settings.stage_queue, device_queue], pool="solo",
                      perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30):
        job = app.send_task("cuzk.submit", queue=settings.cpu_queue, kwargs={
            "circuit": "mulchain", "partitions": [{"input": inputs}] * 2}).get(timeout=60)
        deadline = time.monotonic() + 120
        while (store.get_job(job) or {}).get("state") != "done":
            assert time.monotonic() < deadline, store.get_job(job)
            time.sleep(0.1)
        time.sleep(0.5)  # the last spans end after the state changes
    relay.stop()
    spans = exporter.get_finished_spans()
    runs = [s for s in spans if s.name.startswith("run/")]
    submit = [s for s in runs if s.name == "run/cuzk.submit"]
    assert len(submit) == 1, [s.name for s in spans]
    trace_id = submit[0].context.trace_id
    in_trace = [s.name for s in runs if s.context.trace_id == trace_id]
    # one submit, two partitions: two of each stage, all in the submit's trace
    assert sorted(in_trace) == sorted(["run/cuzk.submit"] + [f"run/{t}" for t in STAGES[1:]] * 2), \
        [(s.name, s.context.trace_id == trace_id) for s in runs]
    # each stage's run is a child of the publish that sent it
    published = {s.context.span_id for s in spans if s.name.startswith("apply_async/")}
    assert all(s.parent is not None and s.parent.span_id in published for s in runs), \
        [(s.name, s.parent) for s in runs]
