"""The cuzk-tasks status page: a read-only Flask app over the Redis state store.

``create_app(config)`` builds it; gunicorn serves it (``webapp/gunicorn.conf.py``,
``cuzk-tasks web``).  Routes: ``/`` (live page), ``/jobs/<id>``, ``/api/status``,
``/api/events`` (Server-Sent Events), ``/api/jobs/<id>``, ``/api/jobs/<id>/result``,
``/metrics``, ``/healthz``.  The JSON schema is in docs/api.md.  While Redis is unreachable
every page that reads it answers 503 (:mod:`webapp.outage`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time

from flask import Flask, Response, abort, jsonify, redirect, render_template, request, url_for

from .config import WebConfig, load_web_config, redact_url
from .live import Broadcaster
from .outage import OutageLog, redis_errors
from .status import SCHEMA_VERSION, StatusReader

log = logging.getLogger("webapp")

COOKIE = "cuzk_web_session"
JOB_PART_FIELDS = ("idx", "state", "attempt", "deliveries", "redispatches", "worker", "synth_ms",
                   "gpu_ms", "finalize_ms", "t_created", "t_synth_start", "t_synth_end", "t_routed",
                   "t_gpu_start", "t_gpu_end", "t_done", "t_end", "error")
#: the endpoints that read Redis: one that answers ends an outage (static files, /login do not)
READS_REDIS = frozenset({"index", "api_status", "api_events", "api_job", "api_job_result",
                         "job_page", "metrics", "healthz"})
#: redis-py reconnects once (a pooled connection Redis dropped in a restart) before a 503
WEB_REDIS_RETRIES = 1

__all__ = ["create_app", "WebConfig", "load_web_config"]


def _session_value(token: str) -> str:
    return hmac.new(token.encode(), b"cuzk-web-session-v1", hashlib.sha256).hexdigest()


def create_app(config: WebConfig | dict | None = None, store=None) -> Flask:
    """Build the app.  ``config``: a WebConfig, a dict of WebConfig field overrides on top
    of the environment, or None (environment: CUZK_CONFIG, CUZK_*, CUZK_WEB_*).  ``store``:
    a StateStore to read (tests); default one on ``config.state_url``."""
    if config is None or isinstance(config, dict):
        overrides = dict(config or {})
        store = overrides.pop("store", store)
        config = load_web_config().replace(**overrides) if overrides else load_web_config()
    if store is None:
        from cuzk_tasks.state import StateStore

        store = StateStore.from_url(config.state_url, prefix=config.prefix,
                                    sentinel_master=config.sentinel_master,
                                    socket_timeout_s=config.redis_timeout_s,
                                    retries=WEB_REDIS_RETRIES)

    app = Flask(__name__)
    app.config["WEB"] = config
    started = time.time()
    reader = StatusReader(store, config.cpu_queue, config.timeline_window_s,
                          config.cache_max_age_ms, web_started_at=started)
    outage = OutageLog()
    live = Broadcaster(store, reader, config.sse_min_interval_ms, config.sse_refresh_s, outage)
    app.extensions["cuzk"] = {"store": store, "reader": reader, "live": live, "outage": outage}
    registry = None
    log.info("status page reading state store %s (prefix %s)", redact_url(config.state_url),
             config.prefix)

    # --- auth ---------------------------------------------------------------------------
    def authorised() -> bool:
        if not config.auth_enabled:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if config.token:
            if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                                  config.token.encode()):
                return True
            cookie = request.cookies.get(COOKIE, "")
            if cookie and hmac.compare_digest(cookie.encode(), _session_value(config.token).encode()):
                return True
        if config.user and config.password and scheme.lower() == "basic":
            try:
                user, _, pw = base64.b64decode(value.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            return (hmac.compare_digest(user.encode(), config.user.encode())
                    & hmac.compare_digest(pw.encode(), config.password.encode()))
        return False

    @app.before_request
    def check_auth():
        path = request.path
        if path == "/healthz" or path.startswith("/static/") or path == "/login":
            return None
        if path == "/metrics" and config.metrics_public:
            return None
        if authorised():
            return None
        wants_html = request.method == "GET" and not path.startswith(("/api/", "/metrics")) \
            and "text/html" in request.headers.get("Accept", "")
        if wants_html and config.token:
            return redirect(url_for("login", next=path))
        resp = jsonify({"error": "authentication required"})
        resp.status_code = 401
        challenges = []
        if config.user and config.password:
            challenges.append('Basic realm="cuzk-tasks", charset="UTF-8"')
        if config.token:
            challenges.append('Bearer realm="cuzk-tasks"')
        resp.headers["WWW-Authenticate"] = ", ".join(challenges)
        return resp

    @app.after_request
    def headers(resp):
        resp.headers.setdefault("Content-Security-Policy",
                                "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
                                "base-uri 'none'; form-action 'self'")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        resp.headers.setdefault("X-Frame-Options", "DENY")
        if request.path.startswith(("/api/", "/metrics", "/healthz")):
            resp.headers.setdefault("Cache-Control", "no-store")
        if request.endpoint in READS_REDIS and resp.status_code != 503:
            outage.ok()
        return resp

    def unreachable(exc):
        """503 for a read that found Redis unreachable (webapp/outage.py)."""
        body = outage.body(exc)
        wants_html = (request.endpoint in ("index", "job_page")
                      and "text/html" in request.headers.get("Accept", ""))
        if wants_html:
            resp = Response(render_template("unavailable.html", o=body), status=503,
                            mimetype="text/html")
        else:
            resp = jsonify(body)
            resp.status_code = 503
        resp.headers["Retry-After"] = str(body["retry_after_s"])
        resp.headers["Cache-Control"] = "no-store"
        return resp

    for error in redis_errors():
        app.register_error_handler(error, unreachable)

    @app.route("/login", methods=["GET", "POST"])
    def login():
        if not config.token:
            return redirect(url_for("index"))
        nxt = request.values.get("next", "/")
        if not nxt.startswith("/") or nxt.startswith("//"):
            nxt = "/"
        error = None
        if request.method == "POST":
            given = request.form.get("token", "")
            if hmac.compare_digest(given.encode(), config.token.encode()):
                resp = redirect(nxt)
                resp.set_cookie(COOKIE, _session_value(config.token), httponly=True,
                                samesite="Strict", secure=request.is_secure, path="/")
                return resp
            error = "wrong token"
        return render_template("login.html", next=nxt, error=error), (401 if error else 200)

    # --- pages and API ------------------------------------------------------------------
    @app.get("/")
    def index():
        status, body, _ = reader.get()
        # JSON inside <script>: < > & only occur in strings, where \uXXXX is the same text
        safe_json = (body.decode().replace("<", "\\u003c").replace(">", "\\u003e")
                     .replace("&", "\\u0026"))
        return render_template("index.html", s=status, status_json=safe_json,
                               poll_ms=config.poll_interval_ms)

    @app.get("/api/status")
    def api_status():
        # the cached document's bytes as they are: nothing is encoded per request
        e = reader.entry()
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

    @app.get("/api/events")
    def api_events():
        sub = live.subscribe()
        max_s = config.sse_max_stream_s

        def stream():
            deadline = time.monotonic() + max_s
            try:
                yield f"retry: {max(500, config.poll_interval_ms // 2)}\n\n".encode()
                try:
                    yield live.status_frame()
                except redis_errors() as exc:  # the reader thread sends one when Redis is back
                    outage.failed(exc)
                while time.monotonic() < deadline:
                    frames = sub.take(timeout=15.0)
                    yield b"".join(frames) if frames else b": keep-alive\n\n"
            finally:
                live.unsubscribe(sub)

        resp = Response(stream(), mimetype="text/event-stream")
        resp.headers["Cache-Control"] = "no-store"
        resp.headers["X-Accel-Buffering"] = "no"
        return resp

    def job_document(job_id):
        job = store.get_job(job_id)
        if job is None:
            return None
        parts = []
        for p in store.list_partitions(job_id):
            d = {k: p.get(k) for k in JOB_PART_FIELDS}
            d["has_proof"] = bool(p.get("proof"))
            parts.append(d)
        done = job.get("state") == "done"
        return {"version": SCHEMA_VERSION,
                "job": {k: job.get(k) for k in ("id", "kind", "circuit", "priority", "state",
                                                "request_id", "submitted_at", "started_at",
                                                "finished_at", "n_partitions", "n_done",
                                                "n_failed", "error", "deadline_s",
                                                "deadline_at")},
                "partitions": parts,
                "result_url": url_for("api_job_result", job_id=job_id) if done else None}

    @app.get("/api/jobs/<job_id>")
    def api_job(job_id):
        doc = job_document(job_id)
        if doc is None:
            return jsonify({"error": "no such job", "job": job_id}), 404
        return jsonify(doc)

    @app.get("/api/jobs/<job_id>/result")
    def api_job_result(job_id):
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

    @app.get("/jobs/<job_id>")
    def job_page(job_id):
        doc = job_document(job_id)
        if doc is None:
            abort(404)
        return render_template("job.html", d=doc)

    @app.get("/metrics")
    def metrics():
        nonlocal registry
        from .metrics import exposition, make_registry

        if registry is None:
            registry = make_registry(reader, store)
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(exposition(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @app.get("/healthz")
    def healthz():
        try:
            t0 = time.perf_counter()
            store.redis.ping()
            return jsonify({"ok": True, "redis": "ok",
                            "redis_ms": round((time.perf_counter() - t0) * 1000, 2)})
        except Exception as exc:  # never echo the URL: it may carry a password
            outage.failed(exc)
            return jsonify({"ok": False, "redis": type(exc).__name__}), 503

    from . import filters

    filters.register(app)
    return app
