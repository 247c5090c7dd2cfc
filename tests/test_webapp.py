"""The status page (cuzk_tasks/web/) through Flask's test client, on fakeredis AND a real
redis-server (the ``store`` fixture), with every state made by the real state-store methods."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid

import pytest

pytest.importorskip("flask")
pytest.importorskip("prometheus_client")

from cuzk_tasks.state import PartitionRun  # noqa: E402
from cuzk_tasks.web import create_app  # noqa: E402
from cuzk_tasks.settings.redis_url import redact  # noqa: E402
from cuzk_tasks.web.config import WebConfig  # noqa: E402

KIND40 = "groth16-porep-snap-deal-update-32gib-v1x"
assert len(KIND40) == 40


def make_app(store, **kw):
    kw.setdefault("cpu_queue", "q" + uuid.uuid4().hex[:8])
    return create_app(WebConfig(prefix=store.prefix, **kw), store=store)


def job(store, job_id, kind="test-kind", n=2, circuit="mulchain"):
    store.create_job(job_id, circuit, kind, 5, None, [{"input": "{}"} for _ in range(n)])
    for i in range(n):
        assert store.synth_begin(PartitionRun(job_id, i, 0))
        assert store.synth_end(PartitionRun(job_id, i, 0), f"/spool/{job_id}.{i}.wtns", 12.0)


def device(store, worker_id="h:dev0", ttl_s=30.0, **extra):
    store.register_worker(worker_id, "device", "h", device=0, queue=f"cuzk.dev.h.{worker_id[-1]}")
    store.heartbeat(worker_id, ttl_s, extra=extra or None)
    return worker_id


def start(store, worker_id, job_id, idx):
    assert store.route(PartitionRun(job_id, idx, 0), worker_id)
    g = store.prove_begin(worker_id, PartitionRun(job_id, idx, 0))
    assert g.ok, g
    return g.token


def expand(doc):
    """Schema 2 sends each partition as an array in ``partition_fields`` order: objects here."""
    fields = doc["partition_fields"]
    for j in doc["jobs"] + doc["recent_jobs"]:
        assert all(isinstance(p, list) and len(p) == len(fields) for p in j["partitions"])
        j["partitions"] = [dict(zip(fields, p)) for p in j["partitions"]]
    return doc


def status(client):
    resp = client.get("/api/status")
    assert resp.status_code == 200
    assert resp.mimetype == "application/json"
    return expand(resp.get_json())


def worker_of(doc, worker_id):
    return next(w for w in doc["workers"] if w["id"] == worker_id)


def test_worker_busy_on_b_after_stale_end_of_a_shows_proving_b(store):
    app = make_app(store)
    c = app.test_client()
    w = device(store)
    job(store, "jobA", kind="kind-a")
    job(store, "jobB", kind="kind-b")
    tok_a = start(store, w, "jobA", 0)
    assert store.prove_end(w, tok_a, PartitionRun("jobA", 0, 0), 40.0).worker_cleared
    start(store, w, "jobB", 0)
    # the finalizer of A ends late, with A's token: it must not clear the worker
    assert store.finalize_end(PartitionRun("jobA", 0, 0), 7.0, {"pi_a": []}, [], token=tok_a).ok
    doc = status(c)
    me = worker_of(doc, w)
    assert (me["state"], me["job"], me["partition"], me["kind"]) == ("proving", "jobB", 0, "kind-b")
    assert me["busy_s"] is not None and me["busy_s"] >= 0
    html = c.get("/").get_data(as_text=True)
    card = html.split(f'data-worker="{w}"', 1)[1].split("</article>", 1)[0]
    assert "st-proving" in html.split(f'data-worker="{w}"', 1)[0].rsplit("<article", 1)[1]
    assert "jobB" in card and "kind-b" in card and "jobA" not in card
    parts = {(j["id"], p["idx"]): p for j in doc["jobs"] for p in j["partitions"]}
    assert parts[("jobA", 0)]["state"] == "done"
    assert parts[("jobB", 0)]["state"] == "proving"


def test_expired_heartbeat_shows_offline(store):
    app = make_app(store)  # default cache: expiry must invalidate it
    c = app.test_client()
    w = device(store, ttl_s=0.4)
    job(store, "j1")
    start(store, w, "j1", 0)
    assert worker_of(status(c), w)["state"] == "proving"
    time.sleep(0.7)
    me = worker_of(status(c), w)
    assert me["state"] == "offline"
    assert me["stored_state"] == "proving"
    html = c.get("/").get_data(as_text=True)
    assert "card st-offline" in html and "no heartbeat" in html


def test_long_proof_kind_in_full_in_html_and_json(store):
    app = make_app(store)
    c = app.test_client()
    w = device(store)
    job(store, "j-long-kind-0123456789abcdef0123456789abcdef", kind=KIND40, n=3)
    start(store, w, "j-long-kind-0123456789abcdef0123456789abcdef", 1)
    doc = status(c)
    assert doc["jobs"][0]["kind"] == KIND40
    assert worker_of(doc, w)["kind"] == KIND40
    html = c.get("/").get_data(as_text=True)
    # in the worker card and the job table, as text (not only inside the embedded JSON)
    visible = html.split('id="initial-status"')[0]
    assert visible.count(f">{KIND40}<") >= 2
    assert visible.count(">j-long-kind-0123456789abcdef0123456789abcdef<") >= 2
    page = c.get("/jobs/j-long-kind-0123456789abcdef0123456789abcdef").get_data(as_text=True)
    assert f">{KIND40}<" in page


def test_script_proof_kind_renders_inert(store):
    evil = "<script>alert(1)</script>"
    app = make_app(store)
    c = app.test_client()
    w = device(store)
    job(store, "jevil", kind=evil, circuit=evil)
    start(store, w, "jevil", 0)
    store.fail_partition(PartitionRun("jevil", 1, 0), f"error {evil}")
    for path in ("/", "/jobs/jevil"):
        html = c.get(path).get_data(as_text=True)
        assert "<script>alert(1)" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        scripts = html.count("<script")
        assert scripts == (3 if path == "/" else 0)  # 2 JSON data blocks + status.js
    assert status(c)["recent_jobs"][0]["kind"] == evil  # JSON carries the text as it is
    csp = c.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_status_schema_queues_counters_failures_timeline(store):
    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    cfg = app.config["WEB"]
    w = device(store, gpu_name="Test GPU", gpu_mem_used_mb=512, gpu_mem_total_mb=8192, gpu_util_pct=37)
    job(store, "js", kind="k1", n=3)
    tok = start(store, w, "js", 0)
    store.prove_end(w, tok, PartitionRun("js", 0, 0), 25.0)
    store.finalize_end(PartitionRun("js", 0, 0), 9.0, {"p": 1}, ["1"])
    store.fail_partition(PartitionRun("js", 1, 0), "witness does not satisfy constraint 7")
    from cuzk_tasks.service.queues import queue_keys

    keys = queue_keys(cfg.cpu_queue)
    store.redis.lpush(keys[0], "m1", "m2")
    store.redis.lpush(keys[3], "m3")
    try:
        doc = status(c)
    finally:
        store.redis.delete(*keys)
    assert doc["version"] == 3
    assert doc["partition_fields"] == ["idx", "state", "attempt", "worker", "synth_ms", "prove_ms",
                                       "finalize_ms", "t_synth_start", "t_prove_start", "t_prove_end",
                                       "t_done", "error"]
    for key in ("generated_at", "uptime_s", "workers", "jobs", "recent_jobs", "queues", "counters",
                "throughput", "throughput_series", "failures", "timeline", "event_id"):
        assert key in doc, key
    assert {"name": cfg.cpu_queue, "depth": 3} in doc["queues"]
    assert doc["counters"]["completed"] == {"k1": 1}
    assert doc["counters"]["failed"] == {"k1": 1}
    assert [t["window_s"] for t in doc["throughput"]] == [60, 300, 900]
    assert doc["throughput"][0]["completed"] == 1
    assert sum(doc["throughput_series"]["counts"]) == 1
    assert doc["failures"][0]["error"] == "witness does not satisfy constraint 7"
    assert doc["failures"][0]["kind"] == "k1"
    me = worker_of(doc, w)
    assert me["gpu_name"] == "Test GPU"
    assert me["gpu"] == {"mem_used_mb": 512, "mem_total_mb": 8192, "util_pct": 37}
    assert me["heartbeat_age_s"] is not None and me["heartbeat_age_s"] < 5
    dev = next(d for d in doc["timeline"]["devices"] if d["worker"] == w)
    assert len(dev["bars"]) == 1 and dev["bars"][0]["job"] == "js" and dev["bars"][0]["end"] is not None
    recent = doc["recent_jobs"][0]
    assert recent["id"] == "js" and recent["state"] == "failed"
    assert [p["state"] for p in recent["partitions"]] == ["done", "failed", "cancelled"]
    assert recent["partitions"][0]["prove_ms"] == 25.0 and recent["partitions"][0]["finalize_ms"] == 9.0


def test_cache_sees_every_transition(store):
    app = make_app(store)  # default cache on
    c = app.test_client()
    w = device(store)
    job(store, "jc")
    assert status(c)["jobs"][0]["partitions"][0]["state"] == "synth_done"
    start(store, w, "jc", 0)
    assert status(c)["jobs"][0]["partitions"][0]["state"] == "proving"
    assert worker_of(status(c), w)["state"] == "proving"


def test_job_page_api_and_result_download(store):
    app = make_app(store)
    c = app.test_client()
    w = device(store)
    job(store, "jd", n=1)
    r = c.get("/api/jobs/jd/result")
    assert r.status_code == 409
    tok = start(store, w, "jd", 0)
    store.prove_end(w, tok, PartitionRun("jd", 0, 0), 30.0)
    assert store.finalize_end(PartitionRun("jd", 0, 0), 5.0, {"pi_a": ["1"]}, ["7"]).job_complete
    doc = c.get("/api/jobs/jd").get_json()
    assert doc["version"] == 3 and doc["job"]["state"] == "done"
    assert doc["partitions"][0]["has_proof"] and doc["partitions"][0]["prove_ms"] == 30.0
    assert "proof" not in doc["partitions"][0]
    r = c.get(doc["result_url"])
    assert r.status_code == 200 and "attachment" in r.headers["Content-Disposition"]
    assert r.get_json()["proofs"][0]["public"] == ["7"]
    html = c.get("/jobs/jd").get_data(as_text=True)
    assert "Download proofs" in html and "30 ms" in html
    assert c.get("/api/jobs/nope").status_code == 404
    assert c.get("/jobs/nope").status_code == 404


def test_the_job_document_carries_no_token_path_or_digest(store):
    """/api/jobs/<id> is the public status document (issue 48): past prove_begin the store
    holds a stage token, the witness path and the request digest; the document none."""
    app = make_app(store)
    store.create_job("js", "mulchain", "k", 5, "r-js", [{"input": "{}"}],
                     request_digest="e" * 64)
    assert store.synth_begin(PartitionRun("js", 0, 0))
    assert store.synth_end(PartitionRun("js", 0, 0), "/spool/js.0.wtns", 12.0)
    tok = start(store, device(store), "js", 0)
    r = app.test_client().get("/api/jobs/js")
    doc, text = r.get_json(), r.get_data(as_text=True)
    assert doc["partitions"][0]["state"] == "proving" and doc["job"]["request_id"] == "r-js"
    for key in ("token", "witness_ref", "request_digest", "release_list"):
        assert key not in doc["job"] and key not in doc["partitions"][0]
    assert tok not in text and "/spool/" not in text and "e" * 64 not in text


def test_metrics(store):
    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    w = device(store)
    job(store, "jm", kind="km", n=2)
    for i in range(2):
        tok = start(store, w, "jm", i)
        store.prove_end(w, tok, PartitionRun("jm", i, 0), 120.0)
        store.finalize_end(PartitionRun("jm", i, 0), 30.0, {}, [])
    # a device fault on a third partition (no other device: it fails) counts as a GPU fault
    job(store, "jf", kind="km", n=1)
    tok = start(store, w, "jf", 0)
    assert store.prove_fault(w, tok, PartitionRun("jf", 0, 0), "cudaErrorIllegalAddress",
                             "mulchain").outcome == "failed"
    text = c.get("/metrics").get_data(as_text=True)
    text2 = c.get("/metrics").get_data(as_text=True)  # folding again counts nothing twice
    assert status(c)["counters"]["prove_faults"] == {"km": 1}
    for t in (text, text2):
        assert 'cuzk_prove_faults_total{kind="km"} 1.0' in t
        assert 'cuzk_proofs_completed_total{kind="km"} 2.0' in t
        assert 'cuzk_partition_phase_seconds_count{phase="prove"} 2.0' in t
        assert 'cuzk_partition_phase_seconds_bucket{le="0.25",phase="prove"} 2.0' in t
        assert 'cuzk_partition_phase_seconds_bucket{le="0.1",phase="prove"} 0.0' in t
        assert 'cuzk_workers{role="device",state="idle"} 1.0' in t
        assert 'cuzk_jobs_finished_total{kind="km",state="done"} 1.0' in t
        assert f'cuzk_queue_depth{{queue="{app.config["WEB"].cpu_queue}"}} 0.0' in t
        assert f'cuzk_device_duty_cycle{{worker="{w}"}}' in t
        assert f'cuzk_worker_up{{host="h",role="device",worker="{w}"}} 1.0' in t


def test_the_estimates_learn_from_finished_partitions_and_metrics_say_how_far_they_were(store):
    """finalize_end moves the circuit's estimates (per device kind too); the next job of the
    circuit gets an ETA at submit; once done, /metrics reports |actual - ETA| / actual."""
    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    w = device(store, backend="cpu")
    job(store, "first", n=1)
    store.prove_end(w, start(store, w, "first", 0), PartitionRun("first", 0, 0), 120.0)
    store.finalize_end(PartitionRun("first", 0, 0), 30.0, {}, [])
    est = store.redis.hgetall(store.keys.estimates("mulchain"))
    assert {k: float(v) for k, v in est.items()} == {
        "synth_ms": 12.0, "prove_ms": 120.0, "prove_ms:cpu": 120.0, "finalize_ms": 30.0}
    text = c.get("/metrics").get_data(as_text=True)
    assert "cuzk_eta_jobs 0.0" in text  # the first job had no estimate to be told
    job(store, "second", n=1)
    assert store.get_job("second")["eta_s"] == pytest.approx((12 + 120 + 30) / 1000)
    store.prove_end(w, start(store, w, "second", 0), PartitionRun("second", 0, 0), 220.0)
    store.finalize_end(PartitionRun("second", 0, 0), 30.0, {}, [])
    assert float(store.redis.hget(store.keys.estimates("mulchain"), "prove_ms")) == \
        pytest.approx(120 + 0.3 * (220 - 120))  # a moving average, the newest weighing 0.3
    (error,) = store.eta_errors()
    assert error["circuit"] == "mulchain" and error["eta_s"] == pytest.approx(0.162)
    # nothing was ahead of it: what it took beyond its estimate moves the circuit's overhead
    # by 0.3 of it
    overhead = float(store.redis.hget(store.keys.estimates("mulchain"), "overhead_ms"))
    assert overhead == pytest.approx(300 * (error["actual_s"] - error["eta_s"]), abs=0.01)
    text = c.get("/metrics").get_data(as_text=True)
    assert "cuzk_eta_jobs 1.0" in text
    ratio = abs(error["actual_s"] - error["eta_s"]) / error["actual_s"]
    assert f'cuzk_eta_error_ratio{{quantile="0.5"}} {ratio!r}' in text, text


def test_devices_name_their_backend_and_cpu_workers_what_they_hold(store):
    """Issue 49 item 9: a device card says which backend proves (a CPU-backend device is no
    GPU); a CPU worker's row what it holds, running or reserved; both in /metrics."""
    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    dev = device(store, backend="cpu")
    cpu = "h:cpu:7"
    store.register_worker(cpu, "cpu", "h", queue="cuzk.cpu")
    store.heartbeat(cpu, 30, holding=[PartitionRun("j", 0, 0), PartitionRun("j", 1, 0)],
                    holding_requests=["task-1"])
    workers = {w["id"]: w for w in status(c)["workers"]}
    assert workers[dev]["backend"] == "cpu"
    assert workers[cpu]["holding"] == {"stages": 2, "requests": 1}
    page = c.get("/").get_data(as_text=True)
    assert "device 0 · cpu backend" in page
    assert "2 stage · 1 request" in page
    text = c.get("/metrics").get_data(as_text=True)
    assert f'cuzk_worker_holding{{what="stages",worker="{cpu}"}} 2.0' in text, text
    assert f'cuzk_device_routed_partitions{{worker="{dev}"}} 0.0' in text


def test_a_device_whose_placed_partitions_wait_for_synthesis_says_so(store_factory):
    """Host-affine stages place a pending partition on a device; until its host's CPU worker
    has synthesized it, the device's card says it waits for synthesis, not for the GPU."""
    store = store_factory(host_affine=True)
    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    cpu = "h:cpu:9"
    store.register_worker(cpu, "cpu", "h", queue="cuzk.cpu")
    store.heartbeat(cpu, 30, extra={"host_queue": "cuzk.cpu.h"})
    dev = device(store, backend="cpu")
    store.create_job("jp", "mulchain", "k", 5, None, [{"input": "{}"}] * 3)
    for i in range(3):
        assert store.route(PartitionRun("jp", i, 0, "mulchain", 5), circuit="mulchain").ok
    assert store.synth_begin(PartitionRun("jp", 0, 0))
    assert store.synth_end(PartitionRun("jp", 0, 0), "/spool/jp.0.wtns", 12.0)
    (w,) = [w for w in status(c)["workers"] if w["id"] == dev]
    assert (w["outstanding"], w["awaiting_synthesis"]) == (3, 2)
    assert "3 routed · 2 waiting for synthesis" in c.get("/").get_data(as_text=True)


def test_worker_up_gauge_goes_to_zero_when_the_heartbeat_expires(store):
    app = make_app(store)  # default cache: heartbeat expiry must invalidate it
    c = app.test_client()
    live = device(store, "h:dev0")
    gone = device(store, "h:dev1", ttl_s=0.4)
    store.register_worker("c:cpu0", "cpu", "c")
    store.heartbeat("c:cpu0", 30.0)
    assert f'cuzk_worker_up{{host="h",role="device",worker="{gone}"}} 1.0' in c.get("/metrics").get_data(as_text=True)
    time.sleep(0.7)
    t = c.get("/metrics").get_data(as_text=True)
    assert f'cuzk_worker_up{{host="h",role="device",worker="{gone}"}} 0.0' in t
    assert f'cuzk_worker_up{{host="h",role="device",worker="{live}"}} 1.0' in t
    assert 'cuzk_worker_up{host="c",role="cpu",worker="c:cpu0"} 1.0' in t


def test_healthz(store):
    c = make_app(store).test_client()
    r = c.get("/healthz")
    assert r.status_code == 200 and r.get_json()["ok"] is True


def test_token_auth(store):
    app = make_app(store, token="s3cret-token")
    c = app.test_client()
    assert c.get("/healthz").status_code == 200
    for path in ("/api/status", "/api/events", "/metrics", "/api/jobs/x"):
        assert c.get(path).status_code == 401, path
    assert c.get("/", headers={"Accept": "text/html"}).status_code == 302
    ok = {"Authorization": "Bearer s3cret-token"}
    assert c.get("/api/status", headers=ok).status_code == 200
    assert c.get("/", headers=ok).status_code == 200
    assert c.get("/api/status", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert c.post("/login", data={"token": "nope", "csrf": login_csrf(c)}).status_code == 401
    r = c.post("/login", data={"token": "s3cret-token", "next": "/", "csrf": login_csrf(c)})
    assert r.status_code == 302
    cookie = r.headers["Set-Cookie"]
    assert "s3cret-token" not in cookie and "HttpOnly" in cookie
    assert c.get("/api/status").status_code == 200  # the cookie now signs in the browser
    public = make_app(store, token="t", metrics_public=True).test_client()
    assert public.get("/metrics").status_code == 200
    assert public.get("/api/status").status_code == 401


def login_csrf(client, path="/login"):
    """The CSRF field of the login form (GET /login also sets its cookie in ``client``)."""
    import re

    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


@pytest.mark.parametrize("nxt", ["/\t/evil.example", "//evil.example", "/\\evil.example",
                                 "https://evil.example", "\t//evil.example", "/\n/evil.example",
                                 "/\x7f/evil.example", "evil.example", "/\r\n/evil.example"])
def test_login_never_redirects_off_site(store, nxt):
    """The exact payload of issue 24 (/login?next=%2F%09%2Fevil.example redirected to
    //evil.example) and its variants: a tab, a backslash, a scheme all land on "/"."""
    c = make_app(store, token="tok").test_client()
    page = c.get("/login?next=%2F%09%2Fevil.example").get_data(as_text=True)
    assert 'name="next" value="/"' in page
    for query in (True, False):
        csrf = login_csrf(c)
        form = {"token": "tok", "csrf": csrf}
        if query:
            from urllib.parse import quote

            r = c.post("/login?next=" + quote(nxt, safe=""), data=form)
        else:
            r = c.post("/login", data=dict(form, next=nxt))
        assert r.status_code == 302 and r.headers["Location"] == "/", (nxt, r.headers["Location"])
    r = c.post("/login", data={"token": "tok", "csrf": login_csrf(c), "next": "/jobs/a"})
    assert r.headers["Location"] == "/jobs/a"
    from cuzk_tasks.web.auth import safe_next

    assert safe_next(nxt) == "/" and safe_next("/jobs/abc?x=1") == "/jobs/abc?x=1"


def test_login_form_needs_its_csrf_value(store):
    """A POST without the form's CSRF value, with a wrong one, or with the value of another
    cookie is refused even with the right token; the form's own value signs in."""
    c = make_app(store, token="tok").test_client()
    assert c.post("/login", data={"token": "tok"}).status_code == 400  # no cookie, no field
    good = login_csrf(c)
    assert c.post("/login", data={"token": "tok", "csrf": "0" * 64}).status_code == 400
    other = make_app(store, token="tok").test_client()
    stale = login_csrf(other)  # valid for other's cookie, not for c's
    assert c.post("/login", data={"token": "tok", "csrf": stale}).status_code == 400
    c.delete_cookie("cuzk_web_csrf", path="/login")
    assert c.post("/login", data={"token": "tok", "csrf": good}).status_code == 400
    r = c.post("/login", data={"token": "tok", "csrf": login_csrf(c)})
    assert r.status_code == 302 and "cuzk_web_session=" in r.headers.get("Set-Cookie", "")
    # a chunked body (no Content-Length) is refused unread: a slow one would hold a thread
    import io

    r = c.post("/login", input_stream=io.BytesIO(b"token=tok"), headers={"Transfer-Encoding": "chunked"},
               content_type="application/x-www-form-urlencoded")
    assert r.status_code == 411


def test_login_failures_are_rate_limited_per_client(store):
    c = make_app(store, token="tok", login_max_failures=3, login_window_s=60).test_client()
    for _ in range(3):
        assert c.post("/login", data={"token": "bad", "csrf": login_csrf(c)}).status_code == 401
    r = c.post("/login", data={"token": "tok", "csrf": login_csrf(c)})  # even the right one
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
    # another address is not affected; stale forms count as failures too
    other = {"REMOTE_ADDR": "10.0.0.9"}
    r = c.post("/login", data={"token": "tok", "csrf": "x"}, environ_base=other)
    assert r.status_code == 400
    page = c.get("/login", environ_base=other).get_data(as_text=True)
    import re

    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
    r = c.post("/login", data={"token": "tok", "csrf": csrf}, environ_base=other)
    assert r.status_code == 302


def test_login_limiter_window_and_memory_bound():
    from cuzk_tasks.web.auth import LoginLimiter

    lim = LoginLimiter(2, 0.3, max_clients=4)
    lim.failed("a"), lim.failed("a")
    assert lim.retry_after("a") >= 1 and lim.retry_after("b") == 0
    time.sleep(0.35)
    assert lim.retry_after("a") == 0
    for i in range(50):
        lim.failed(f"c{i}")
    assert len(lim._failures) <= 4


def test_basic_auth(store):
    c = make_app(store, user="ops", password="pw:with:colons").test_client()
    r = c.get("/api/status")
    assert r.status_code == 401 and "Basic" in r.headers["WWW-Authenticate"]
    good = base64.b64encode(b"ops:pw:with:colons").decode()
    bad = base64.b64encode(b"ops:wrong").decode()
    assert c.get("/api/status", headers={"Authorization": f"Basic {good}"}).status_code == 200
    assert c.get("/api/status", headers={"Authorization": f"Basic {bad}"}).status_code == 401


def test_no_redis_password_in_pages_or_logs(store, caplog):
    url = "redis://:hunter2-secret@db.example:6379/0"
    assert "hunter2" not in redact(url)
    with caplog.at_level(logging.DEBUG):
        app = create_app(WebConfig(prefix=store.prefix, state_url=url), store=store)
        c = app.test_client()
        device(store)
        bodies = [c.get(p).get_data(as_text=True) for p in ("/", "/api/status", "/metrics", "/healthz")]
    assert all("hunter2" not in b for b in bodies)
    assert "hunter2" not in caplog.text


def test_read_only(store):
    c = make_app(store).test_client()
    for path in ("/api/status", "/api/jobs/x", "/metrics", "/"):
        assert c.post(path).status_code == 405
        assert c.delete(path).status_code == 405


def test_event_stream_pushes_transitions_and_status(store):
    app = make_app(store, sse_min_interval_ms=50, sse_refresh_s=0.5, sse_max_stream_s=10)
    c = app.test_client()
    w = device(store)
    job(store, "je")
    resp = c.get("/api/events", buffered=False)
    assert resp.mimetype == "text/event-stream"
    chunks = iter(resp.response)
    first = b""
    while b"event: status" not in first:
        first += next(chunks)
    data = first.split(b"event: status", 1)[1].split(b"data: ", 1)[1].split(b"\n\n", 1)[0]
    assert worker_of(json.loads(data), w)["state"] == "idle"
    start(store, w, "je", 0)
    seen, deadline = b"", time.monotonic() + 8
    while time.monotonic() < deadline:
        seen += next(chunks)
        if b'"type":"prove_begin"' in seen and b'"proving"' in seen.split(b"event: status")[-1]:
            break
    assert b'"type":"prove_begin"' in seen
    last_status = seen.split(b"event: status")[-1].split(b"data: ", 1)[1].split(b"\n\n", 1)[0]
    me = worker_of(json.loads(last_status), w)
    assert me["state"] == "proving" and me["job"] == "je"
    resp.close()


def test_status_bytes_gzip_etag_304(store):
    import gzip

    app = make_app(store)  # default cache: one document serves the requests below
    c = app.test_client()
    w = device(store)
    job(store, "jg", n=3)
    start(store, w, "jg", 1)
    plain = c.get("/api/status")
    assert plain.headers.get("Content-Encoding") is None
    assert plain.headers["Vary"] == "Accept-Encoding"
    assert plain.headers["Cache-Control"] == "private, no-cache"
    etag = plain.headers["ETag"]
    assert etag.startswith('W/"')
    zipped = c.get("/api/status", headers={"Accept-Encoding": "br, gzip;q=0.8"})
    assert zipped.headers["Content-Encoding"] == "gzip" and zipped.headers["ETag"] == etag
    assert gzip.decompress(zipped.get_data()) == plain.get_data()  # the same bytes, compressed
    refused = c.get("/api/status", headers={"Accept-Encoding": "gzip;q=0"})
    assert refused.headers.get("Content-Encoding") is None
    same = c.get("/api/status", headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.get_data() == b"" and same.headers["ETag"] == etag
    doc = expand(plain.get_json())
    assert [p["state"] for p in doc["jobs"][0]["partitions"]] == ["synth_done", "proving", "synth_done"]
    assert doc["jobs"][0]["partitions"][1]["worker"] == w
    start(store, w, "jg", 0)  # a transition: a new document, a new ETag
    changed = c.get("/api/status", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert expand(changed.get_json())["jobs"][0]["partitions"][0]["state"] == "proving"


def test_new_device_queue_does_not_force_a_full_read(store, monkeypatch):
    from cuzk_tasks.service.queues import queue_keys
    from cuzk_tasks.state import reads

    app = make_app(store, cache_max_age_ms=0)
    c = app.test_client()
    device(store, "h:dev1")
    job(store, "jq", n=2)
    status(c)  # the first read is a full one
    cursors = []
    real = reads.status_delta

    def spy(store_, cursor, *a, **kw):
        cursors.append(cursor)
        return real(store_, cursor, *a, **kw)

    monkeypatch.setattr(reads, "status_delta", spy)
    device(store, "h:dev2")  # a new device, with a queue not read before
    store.redis.lpush(queue_keys("cuzk.dev.h.2")[0], "m")
    try:
        doc = status(c)
    finally:
        store.redis.delete(*queue_keys("cuzk.dev.h.2"))
    assert cursors and all(cur for cur in cursors), cursors  # never a full read (cursor None)
    assert {"name": "cuzk.dev.h.2", "depth": 1} in doc["queues"]
    assert [p["state"] for p in doc["jobs"][0]["partitions"]] == ["synth_done", "synth_done"]


def test_a_job_with_a_deadline_shows_the_time_left(store):
    app = make_app(store)
    c = app.test_client()
    store.create_job("jt", "mulchain", "k", 5, None, [{"input": "{}"}], deadline_s=600)
    doc = status(c)
    (j,) = [j for j in doc["jobs"] if j["id"] == "jt"]
    assert j["deadline_s"] == 600 and 599 < j["deadline_at"] - doc["generated_at"] <= 600
    html = c.get("/").get_data(as_text=True)
    assert "9m 5" in html and " left</span>" in html  # 9m 59s (or 58s) left
    assert "deadline" in c.get("/jobs/jt").get_data(as_text=True)


def test_gunicorn_worker_start_warms_the_status_cache(store):
    """cuzk_tasks/web/gunicorn.conf.py's post_worker_init makes the first status read in the
    background, so the first request does not pay for it."""
    import pathlib
    import runpy
    import types

    conf = runpy.run_path(str(pathlib.Path(__file__).resolve().parent.parent / "cuzk_tasks"
                              / "web" / "gunicorn.conf.py"))
    job(store, "warm-" + uuid.uuid4().hex[:6])
    app = make_app(store)
    reader = app.extensions["cuzk"].reader
    assert not reader.cached
    conf["post_worker_init"](types.SimpleNamespace(wsgi=app))
    deadline = time.monotonic() + 10
    while not reader.cached:
        assert time.monotonic() < deadline, "post_worker_init did not read the status"
        time.sleep(0.02)


def test_a_device_on_a_host_without_a_cpu_worker_is_flagged(store):
    """Host-affine stages: a device whose host has no live CPU worker gets no partitions,
    and the page says so (JSON ``no_cpu_worker``, the card's warning); the circuits a
    worker advertises are shown."""
    device(store, "h:dev0", circuits='["mulchain"]')
    store.register_worker("g:dev1", "device", "g", device=1, queue="cuzk.dev.g.1")
    store.heartbeat("g:dev1", 30.0)
    store.register_worker("h:cpu:1", "cpu", "h", queue="cuzk.cpu")
    store.heartbeat("h:cpu:1", 30.0, extra={"host_queue": "cuzk.cpu.h"})
    client = make_app(store, cache_max_age_ms=0).test_client()
    doc = status(client)
    assert worker_of(doc, "h:dev0")["no_cpu_worker"] is False
    assert worker_of(doc, "h:dev0")["circuits"] == ["mulchain"]
    assert worker_of(doc, "g:dev1")["no_cpu_worker"] is True
    assert worker_of(doc, "g:dev1")["circuits"] is None
    html = client.get("/").get_data(as_text=True)
    assert "no CPU worker on g: gets no partitions" in html
    assert html.count("gets no partitions") == 1
    # the host's CPU queue is listed with its depth (synthesize and finalize of h's devices)
    store.redis.lpush("cuzk.cpu.h", "x")
    try:
        names = {q["name"]: q["depth"] for q in status(client)["queues"]}
        assert names.get("cuzk.cpu.h") == 1, names
    finally:
        store.redis.delete("cuzk.cpu.h")
