"""OpenTelemetry traces of every task, with the ``otel`` extra (``pip install 'cuzk-tasks[otel]'``).

:func:`instrument` runs in every worker pool process (``worker_process_init``, as
opentelemetry-instrumentation-celery asks for prefork pools).  Celery's instrumentation then
opens a span for each task run and each publish, and carries the trace context in the
message headers; since every next-stage message is published by ``send_task`` from the
task that made it due (the outbox, docs/architecture.md), a job's submit, synthesize,
prove and finalize share one trace.  Spans go to the tracer provider the process
has: one set up by the caller (``opentelemetry-instrument``, a test's), else -- when
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set -- an OTLP/HTTP
exporter with ``service.name`` from ``OTEL_SERVICE_NAME`` (default ``cuzk-tasks``).
Without the extra installed this does nothing.

A message a device's step records is published later by a CPU worker's relay thread
(cuzk_tasks/service/publisher.py ``OutboxRelay``), outside the task's span: :func:`carrier` keeps the
task's trace context in the outbox entry and :func:`attached` makes it the current one while
the relay publishes it, so that message stays in the job's trace.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os

log = logging.getLogger("cuzk_tasks.service.tracing")

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def instrument(environ=None) -> bool:
    """Instrument Celery in this process; False when the ``otel`` extra is not installed."""
    environ = os.environ if environ is None else environ
    try:
        # lazy: the otel extra is optional
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
    except ImportError:
        return False
    if any(environ.get(name) for name in _ENDPOINT_VARS):
        _export_with_otlp(environ)
    instrumentor = CeleryInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
    return True


def _export_with_otlp(environ) -> None:
    """A tracer provider exporting over OTLP/HTTP, unless the process has one already."""
    # lazy: the otel extra is optional (instrument checked it is installed)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    try:
        # lazy: the exporter may be missing from an install without the whole extra
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        # lazy: as above
        from opentelemetry.sdk.resources import Resource
        # lazy: as above
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("OTLP endpoint set but its exporter is missing (%s): no traces exported", exc)
        return
    provider = TracerProvider(resource=Resource.create(
        {"service.name": environ.get("OTEL_SERVICE_NAME") or "cuzk-tasks"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


@functools.lru_cache(maxsize=1)
def _otel():
    """``(opentelemetry.context, opentelemetry.propagate)``, or None without the otel extra
    (looked up once: a failed import is not cached by Python, and this is on every message)."""
    try:
        # lazy: the otel extra is optional
        from opentelemetry import context, propagate
    except ImportError:
        return None
    return context, propagate


def carrier() -> dict | None:
    """The current trace context as W3C headers (``{"traceparent": ...}``), or None without
    the otel extra or outside a span."""
    otel = _otel()
    if otel is None:
        return None
    headers = {}
    otel[1].inject(headers)
    return headers or None


@contextlib.contextmanager
def attached(headers):
    """The trace context of ``headers`` (:func:`carrier`) as the current one for the block;
    nothing without them or without the otel extra."""
    otel = _otel() if headers else None
    if otel is None:
        yield
        return
    context, propagate = otel
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)
