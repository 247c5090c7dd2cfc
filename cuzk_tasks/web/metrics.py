"""GET /metrics: Prometheus exposition built from Redis at scrape time.

Counters and gauges come from the status document (the same cached, consistent read the
page uses); phase-duration histograms from ``reads.phase_histograms``: the transition that
completes a partition counts it in Redis, so every web process reports the same counts and
a scrape writes nothing.
"""

from __future__ import annotations

from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from cuzk_tasks.state import reads

from .services import get_services

bp = Blueprint("metrics", __name__)

WORKER_STATES = ("proving", "idle", "offline")


def _counter(name, doc, labels, values):
    family = CounterMetricFamily(name, doc, labels=labels)
    for label_values, n in values:
        family.add_metric(label_values, n)
    return family


def counter_families(c):
    """The counters of the status document's ``counters``."""
    by_kind = lambda group: [([kind], n) for kind, n in sorted(c[group].items())]  # noqa: E731
    yield _counter("cuzk_proofs_completed", "Partition proofs completed, by proof kind",
                   ["kind"], by_kind("completed"))
    yield _counter("cuzk_proofs_failed", "Partition proofs failed, by proof kind", ["kind"],
                   by_kind("failed"))
    yield _counter("cuzk_prove_faults", "Device errors in prove, by proof kind "
                   "(each moved its partition to another device, or failed it)", ["kind"],
                   by_kind("prove_faults"))
    yield _counter("cuzk_requests_refused", "Messages a worker refused before running them, by "
                   "task: out of bounds, or a stage message the service did not issue (forged "
                   "or altered: its seal does not match)", ["task"],
                   by_kind("requests_rejected"))
    yield _counter("cuzk_jobs_finished", "Jobs finished, by proof kind and outcome",
                   ["kind", "state"],
                   [([kind, state], n) for group, state in (("jobs_done", "done"),
                                                            ("jobs_failed", "failed"),
                                                            ("jobs_cancelled", "cancelled"))
                    for kind, n in sorted(c[group].items())])


def histogram_family(store):
    """Phase durations, from the histograms the transitions keep in Redis."""
    h = HistogramMetricFamily("cuzk_partition_phase_seconds",
                              "Partition phase durations (synth, prove, finalize)",
                              labels=["phase"])
    for phase, data in reads.phase_histograms(store).items():
        buckets = [("+Inf" if upper == float("inf") else repr(upper / 1000.0), n)
                   for upper, n in data["buckets"]]
        h.add_metric([phase.removesuffix("_ms")], buckets, data["sum_ms"] / 1000.0)
    return h


def worker_families(workers):
    w = GaugeMetricFamily("cuzk_workers", "Workers by role and state", labels=["role", "state"])
    counts = {}
    for worker in workers:
        key = (worker["role"] or "", worker["state"])
        counts[key] = counts.get(key, 0) + 1
    for role in sorted({r for r, _ in counts} | {"device", "cpu"}):
        for state in WORKER_STATES:
            w.add_metric([role, state], counts.get((role, state), 0))
    yield w
    up = GaugeMetricFamily("cuzk_worker_up",
                           "1 while the worker's heartbeat is alive, 0 once it expired (offline)",
                           labels=["worker", "role", "host"])
    for worker in workers:
        up.add_metric([worker["id"], worker["role"] or "", worker["host"] or ""],
                      0 if worker["state"] == "offline" else 1)
    yield up
    routed = GaugeMetricFamily("cuzk_device_routed_partitions",
                               "Partitions routed to each device worker, not yet proved",
                               labels=["worker"])
    holding = GaugeMetricFamily("cuzk_worker_holding",
                                "Messages each worker holds, running or reserved (its heartbeat)",
                                labels=["worker", "what"])
    for worker in workers:
        if worker["role"] == "device":
            routed.add_metric([worker["id"]], worker.get("outstanding") or 0)
        for what in ("stages", "requests"):
            holding.add_metric([worker["id"], what], (worker.get("holding") or {}).get(what, 0))
    yield routed
    yield holding


def gauge_families(status):
    """Queues, workers, devices' duty cycles, active jobs, throughput."""
    q = GaugeMetricFamily("cuzk_queue_depth", "Messages waiting per Celery queue", labels=["queue"])
    for item in status["queues"]:
        q.add_metric([item["name"]], item["depth"])
    yield q
    yield from worker_families(status["workers"])
    duty = GaugeMetricFamily("cuzk_device_duty_cycle",
                             "Fraction of the timeline window each device spent in prove",
                             labels=["worker"])
    for dev in status["timeline"]["devices"]:
        if dev["duty_cycle"] is not None:
            duty.add_metric([dev["worker"]], dev["duty_cycle"])
    yield duty
    active = GaugeMetricFamily("cuzk_jobs_active", "Unfinished jobs")
    active.add_metric([], len(status["jobs"]))
    yield active
    thr = GaugeMetricFamily("cuzk_throughput_per_minute", "Partition proofs per minute",
                            labels=["window_s"])
    for t in status["throughput"]:
        thr.add_metric([str(t["window_s"])], t["per_min"])
    yield thr


def eta_families(errors):
    """How far the ETAs told at submit were from what the jobs took, over the last done jobs
    that had one (``StateStore.eta_errors``): |actual - ETA| / actual at the median and p90,
    and how many jobs that is."""
    ratios = sorted(abs(e["actual_s"] - e["eta_s"]) / e["actual_s"]
                    for e in errors if e.get("actual_s", 0) > 0)
    g = GaugeMetricFamily("cuzk_eta_error_ratio",
                          "|actual - ETA| / actual of the last done jobs that had an ETA",
                          labels=["quantile"])
    if ratios:
        for q in (0.5, 0.9):
            g.add_metric([str(q)], ratios[min(len(ratios) - 1, int(q * len(ratios)))])
    yield g
    n = GaugeMetricFamily("cuzk_eta_jobs", "Done jobs the ETA error ratio is over")
    n.add_metric([], len(ratios))
    yield n


class StatusCollector:
    def __init__(self, reader, store):
        self.reader = reader
        self.store = store

    def collect(self):
        status, _, _ = self.reader.get()
        yield from counter_families(status["counters"])
        yield histogram_family(self.store)
        yield from gauge_families(status)
        yield from eta_families(self.store.eta_errors())


def make_registry(reader, store) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(reader, store))
    return registry


def exposition(registry) -> bytes:
    return generate_latest(registry)


@bp.get("/metrics")
def metrics():
    services = get_services()
    if services.metrics_registry is None:
        services.metrics_registry = make_registry(services.reader, services.store)
    return Response(exposition(services.metrics_registry),
                    headers={"Content-Type": CONTENT_TYPE_LATEST})
