"""GET /metrics: Prometheus exposition built from Redis at scrape time.

Counters and gauges come from the status document (the same cached, consistent read the
page uses); phase-duration histograms come from ``read_extra.phase_histograms``, folded in
Redis so every web process reports the same cumulative counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from cuzk_tasks.state import read_extra

WORKER_STATES = ("proving", "idle", "offline")


class StatusCollector:
    def __init__(self, reader, store):
        self.reader = reader
        self.store = store

    def collect(self):
        status, _, _ = self.reader.get()
        c = status["counters"]
        done = CounterMetricFamily("cuzk_proofs_completed", "Partition proofs completed, by proof kind",
                                   labels=["kind"])
        for kind, n in sorted(c["completed"].items()):
            done.add_metric([kind], n)
        yield done
        failed = CounterMetricFamily("cuzk_proofs_failed", "Partition proofs failed, by proof kind",
                                     labels=["kind"])
        for kind, n in sorted(c["failed"].items()):
            failed.add_metric([kind], n)
        yield failed
        faults = CounterMetricFamily("cuzk_gpu_faults", "Device errors in prove_start, by proof kind "
                                     "(each moved its partition to another device, or failed it)",
                                     labels=["kind"])
        for kind, n in sorted(c["gpu_faults"].items()):
            faults.add_metric([kind], n)
        yield faults
        jobs = CounterMetricFamily("cuzk_jobs_finished", "Jobs finished, by proof kind and outcome",
                                   labels=["kind", "state"])
        for group, state in (("jobs_done", "done"), ("jobs_failed", "failed"),
                             ("jobs_cancelled", "cancelled")):
            for kind, n in sorted(c[group].items()):
                jobs.add_metric([kind, state], n)
        yield jobs

        hist = read_extra.phase_histograms(self.store)
        h = HistogramMetricFamily("cuzk_partition_phase_seconds",
                                  "Partition phase durations (synth, gpu = prove_start, finalize)",
                                  labels=["phase"])
        for phase, data in hist.items():
            buckets = [("+Inf" if upper == float("inf") else repr(upper / 1000.0), n)
                       for upper, n in data["buckets"]]
            h.add_metric([phase.removesuffix("_ms")], buckets, data["sum_ms"] / 1000.0)
        yield h

        q = GaugeMetricFamily("cuzk_queue_depth", "Messages waiting per Celery queue", labels=["queue"])
        for item in status["queues"]:
            q.add_metric([item["name"]], item["depth"])
        yield q

        w = GaugeMetricFamily("cuzk_workers", "Workers by role and state", labels=["role", "state"])
        counts = {}
        for worker in status["workers"]:
            key = (worker["role"] or "", worker["state"])
            counts[key] = counts.get(key, 0) + 1
        for role in sorted({r for r, _ in counts} | {"device", "cpu"}):
            for state in WORKER_STATES:
                w.add_metric([role, state], counts.get((role, state), 0))
        yield w

        up = GaugeMetricFamily("cuzk_worker_up",
                               "1 while the worker's heartbeat is alive, 0 once it expired (offline)",
                               labels=["worker", "role", "host"])
        for worker in status["workers"]:
            up.add_metric([worker["id"], worker["role"] or "", worker["host"] or ""],
                          0 if worker["state"] == "offline" else 1)
        yield up

        duty = GaugeMetricFamily("cuzk_device_duty_cycle",
                                 "Fraction of the timeline window each device spent in prove_start",
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


def make_registry(reader, store) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(reader, store))
    return registry


def exposition(registry) -> bytes:
    return generate_latest(registry)
