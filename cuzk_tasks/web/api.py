"""The JSON API (docs/api.md): /api/status, /api/events (Server-Sent Events), /api/jobs/<id>,
/api/jobs/<id>/result, /healthz."""

from __future__ import annotations

import json
import time

from flask import Blueprint, Response, jsonify, request, url_for

from cuzk_tasks.settings.defaults import JOB_STATUS_PAGE
from cuzk_tasks.state.reads import PUBLIC_JOB_FIELDS, PUBLIC_PARTITION_FIELDS

from .outage import is_outage, redis_errors
from .services import get_services, get_store
from .status import SCHEMA_VERSION

bp = Blueprint("api", __name__)

#: /api/jobs/<id> "job" (docs/api.md): the public job fields (``reads.PUBLIC_JOB_FIELDS``)
#: but the on_done ones, which version 3 of this document never carried
JOB_FIELDS = tuple(f for f in PUBLIC_JOB_FIELDS if not f.startswith("on_done"))
#: /api/jobs/<id> per partition (docs/api.md): the public partition fields
#: (``reads.PUBLIC_PARTITION_FIELDS``: no token, no witness path) but t_redispatched
JOB_PARTITION_FIELDS = tuple(f for f in PUBLIC_PARTITION_FIELDS if f != "t_redispatched")


def page_args() -> tuple[int, int | None]:
    """``?offset=`` and ``?limit=`` of a job request (a page of its partitions; limit at most
    ``JOB_STATUS_PAGE``), or ValueError naming the bad one."""
    values = []
    for name, default in (("offset", 0), ("limit", None)):
        text = request.args.get(name)
        if text is None:
            values.append(default)
            continue
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0 or (name == "limit" and not 0 < value <= JOB_STATUS_PAGE):
            raise ValueError(f"{name}: expected an integer >= 0"
                             + (f" (limit 1..{JOB_STATUS_PAGE})" if name == "limit" else ""))
        values.append(value)
    return values[0], values[1]


def job_document(job_id, offset=0, limit=None) -> dict | None:
    """The /api/jobs/<id> document (also what /jobs/<id> renders): the job, one page of its
    partitions (``offset``, ``limit``: ``StateStore.job_status``), the page and the counts
    by state; None for an unknown job."""
    store = get_store()
    status = store.job_status(job_id, offset=offset, limit=limit, fields=JOB_PARTITION_FIELDS)
    if status is None:
        return None
    parts = []
    for p in status["partitions"]:
        d = {k: p.get(k) for k in JOB_PARTITION_FIELDS}
        d["has_proof"] = p.get("state") == "done"  # finalize_end stores the proof with it
        parts.append(d)
    done = status.get("state") == "done"
    return {"version": SCHEMA_VERSION, "job": {k: status.get(k) for k in JOB_FIELDS},
            "partitions": parts, "page": status["page"], "counts": status["counts"],
            "result_url": url_for("api.job_result", job_id=job_id) if done else None}


@bp.get("/api/status")
def status():
    # the cached document's bytes as they are: nothing is encoded per request
    e = get_services().reader.entry()
    if request.if_none_match and request.if_none_match.contains_weak(e.etag[3:-1]):  # W/"tag"
        resp = Response(status=304)
    elif request.accept_encodings["gzip"] > 0:
        resp = Response(e.gzipped(), mimetype="application/json")
        resp.headers["Content-Encoding"] = "gzip"
    else:
        resp = Response(e.body, mimetype="application/json")
    resp.headers["ETag"] = e.etag
    resp.headers["Vary"] = "Accept-Encoding"
    # stored, but revalidated on every use (If-None-Match: a 304 when unchanged)
    resp.headers["Cache-Control"] = "private, no-cache"
    return resp


@bp.get("/api/events")
def events():
    services = get_services()
    live, config, outage = services.live, services.config, services.outage
    sub = live.subscribe(request.remote_addr)
    if sub is None:  # each stream holds a thread: over a cap the page polls /api/status
        resp = jsonify({"error": "too many live streams; poll /api/status",
                        "retry_after_s": config.sse_retry_after_s})
        resp.status_code = 429
        resp.headers["Retry-After"] = str(config.sse_retry_after_s)
        return resp

    def stream():
        deadline = time.monotonic() + config.sse_max_stream_s
        try:
            yield f"retry: {max(500, config.poll_interval_ms // 2)}\n\n".encode()
            try:
                yield live.status_frame()
            except redis_errors() as exc:  # the reader thread sends one when Redis is back
                if not is_outage(exc):
                    raise
                outage.failed(exc)
            while time.monotonic() < deadline:
                frames = sub.take(timeout=15.0)
                yield b"".join(frames) if frames else b": keep-alive\n\n"
        finally:
            live.unsubscribe(sub)

    resp = Response(stream(), mimetype="text/event-stream")
    # the slot is freed when gunicorn closes the response, even if the stream never started
    resp.call_on_close(lambda: live.unsubscribe(sub))
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["X-Accel-Buffering"] = "no"
    return resp


@bp.get("/api/jobs/<job_id>")
def job(job_id):
    try:
        offset, limit = page_args()
    except ValueError as exc:
        return jsonify({"error": str(exc), "job": job_id}), 400
    doc = job_document(job_id, offset, limit)
    if doc is None:
        return jsonify({"error": "no such job", "job": job_id}), 404
    return jsonify(doc)


@bp.get("/api/jobs/<job_id>/result")
def job_result(job_id):
    store = get_store()
    job = store.get_job(job_id)
    if job is None:
        return jsonify({"error": "no such job", "job": job_id}), 404
    if job.get("state") != "done":
        return jsonify({"error": f"job is {job.get('state')}, not done", "job": job_id}), 409
    result = store.get_result(job_id) or store.collect_result(job_id)
    resp = Response(json.dumps(result, indent=1), mimetype="application/json")
    safe = "".join(c for c in job_id if c.isalnum() or c in "-_.")[:80] or "job"
    resp.headers["Content-Disposition"] = f'attachment; filename="proofs-{safe}.json"'
    return resp


@bp.get("/healthz")
def healthz():
    services = get_services()
    try:
        t0 = time.perf_counter()
        services.store.ping()
        return jsonify({"ok": True, "redis": "ok",
                        "redis_ms": round((time.perf_counter() - t0) * 1000, 2)})
    except Exception as exc:  # never echo the URL: it may carry a password
        services.outage.failed(exc)
        return jsonify({"ok": False, "redis": type(exc).__name__}), 503
