"""The status page while Redis is unreachable: one log line per outage, and the 503 answer.

Every read of the page goes to Redis.  When Redis is down, restarting, loading its AOF,
paused or busy with a script, a read fails within ``WebConfig.redis_timeout_s`` and the request is answered 503
"state store unreachable" (JSON for /api/* and /metrics, a page that reloads itself for a
person); the next read that succeeds ends the outage.  Nothing is retried inside a request:
the page and scrapers poll anyway, and a gunicorn thread is never held by a dead Redis.
"""

from __future__ import annotations

import logging
import threading
import time

from flask import Response, jsonify, render_template, request

from cuzk_tasks.settings.redis_url import is_outage, outage_errors

log = logging.getLogger("cuzk_tasks.web")

#: the endpoints that read Redis: one that answers ends an outage (static files, /login do not)
READS_REDIS = frozenset({"pages.index", "pages.job", "api.status", "api.events", "api.job",
                         "api.job_result", "api.healthz", "metrics.metrics"})
HTML_PAGES = ("pages.index", "pages.job")


def redis_errors() -> tuple[type[BaseException], ...]:
    """The classes of the errors that can mean "Redis is unreachable", not "the request is
    wrong": refused or dropped connections, timeouts, a Redis loading its data set
    (``BusyLoadingError``), a Sentinel group without a master yet (``MasterNotFoundError``),
    and the replies of a Redis that cannot serve now (BUSY with a script, OOM, READONLY:
    ``ResponseError``).  :func:`is_outage` tells which instance is one."""
    return outage_errors()


class OutageLog:
    """Tracks whether the state store is reachable, for the log and for the 503 answer.

    ``failed(exc)`` logs one warning when an outage starts (however many requests and
    threads see it fail); ``ok()`` logs one line when Redis answers again."""

    def __init__(self, what: str = "the status page answers 503"):
        self.what = what
        self._lock = threading.Lock()
        self.since: float | None = None  # Unix time the current outage began

    def failed(self, exc: BaseException) -> float:
        """Record a failed read; returns when the outage began (Unix seconds)."""
        with self._lock:
            if self.since is not None:
                return self.since
            self.since = time.time()
        log.warning("Redis unreachable (%s): %s until it is back", type(exc).__name__, self.what)
        return self.since

    def ok(self) -> None:
        """Record a successful read."""
        if self.since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self.since = self.since, None
        if since is not None:
            log.warning("Redis is back after %.1f s", time.time() - since)

    def body(self, exc: BaseException) -> dict:
        """The 503 document (docs/api.md).  The error's type only: its text may name the
        Redis host."""
        since = self.failed(exc)
        return {"error": "state store unreachable", "redis": type(exc).__name__,
                "since": round(since, 3), "retry_after_s": 1}


def register(app, outage: OutageLog) -> None:
    """Answer 503 for every read that finds Redis unreachable, and end the outage at the
    first read that succeeds."""

    def unreachable(exc):
        if not is_outage(exc):
            raise exc  # a reply that says the read is wrong: Flask's 500, logged
        body = outage.body(exc)
        if request.endpoint in HTML_PAGES and "text/html" in request.headers.get("Accept", ""):
            resp = Response(render_template("unavailable.html", o=body), status=503,
                            mimetype="text/html")
        else:
            resp = jsonify(body)
            resp.status_code = 503
        resp.headers["Retry-After"] = str(body["retry_after_s"])
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def answered(resp):
        if request.endpoint in READS_REDIS and resp.status_code != 503:
            outage.ok()
        return resp

    for error in redis_errors():
        app.register_error_handler(error, unreachable)
    app.after_request(answered)
