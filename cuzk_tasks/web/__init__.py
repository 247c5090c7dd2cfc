"""The cuzk-tasks status page: a read-only Flask app over the Redis state store.

``create_app(config)`` builds it; gunicorn serves it (``cuzk_tasks/web/gunicorn.conf.py``,
``cuzk-tasks web``).  Blueprints: ``auth`` (token, basic auth, /login), ``pages`` (/,
/jobs/<id>), ``api`` (/api/status, /api/events, /api/jobs/<id>, /api/jobs/<id>/result,
/healthz), ``metrics`` (/metrics).  Views reach the store through :mod:`cuzk_tasks.web.services`.
The JSON schema is in docs/api.md.  While Redis is unreachable every page that reads it
answers 503 (:mod:`cuzk_tasks.web.outage`).
"""

from __future__ import annotations

import logging
import time

from flask import Flask, request

from cuzk_tasks.settings.redis_url import redact
from cuzk_tasks.state import StateStore

from . import api, auth, filters, metrics, outage, pages
from .config import WebConfig, load_web_config
from .live import Broadcaster
from .services import EXTENSION, Services
from .status import StatusReader

log = logging.getLogger("cuzk_tasks.web")

#: redis-py reconnects once (a pooled connection Redis dropped in a restart) before a 503
WEB_REDIS_RETRIES = 1
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")

__all__ = ["create_app", "WebConfig", "load_web_config"]


def _config(config) -> WebConfig:
    if isinstance(config, WebConfig):
        return config
    overrides = dict(config or {})
    return load_web_config().replace(**overrides) if overrides else load_web_config()


def _open_store(config: WebConfig):
    return StateStore.from_url(config.state_url, prefix=config.prefix,
                               sentinel_master=config.sentinel_master,
                               socket_timeout_s=config.redis_timeout_s, retries=WEB_REDIS_RETRIES)


def _security_headers(resp):
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    if request.path.startswith(("/api/", "/metrics", "/healthz")):
        resp.headers.setdefault("Cache-Control", "no-store")
    return resp


def create_app(config: WebConfig | dict | None = None, store=None) -> Flask:
    """Build the app.  ``config``: a WebConfig, a dict of WebConfig field overrides on top
    of the environment (``store`` may ride in it), or None (environment: CUZK_CONFIG,
    CUZK_*, CUZK_WEB_*).  ``store``: a StateStore to read (tests); default one on
    ``config.state_url``."""
    if isinstance(config, dict) and "store" in config:
        config = dict(config)
        store = config.pop("store")
    config = _config(config)
    store = store if store is not None else _open_store(config)
    app = Flask(__name__)
    app.config["WEB"] = config
    reader = StatusReader(store, config.cpu_queue, config.timeline_window_s,
                          config.cache_max_age_ms, web_started_at=time.time())
    outage_log = outage.OutageLog()
    live = Broadcaster(store, reader, config.sse_min_interval_ms, config.sse_refresh_s, outage_log,
                       max_streams=config.stream_cap,
                       max_per_client=config.sse_max_streams_per_client)
    app.extensions[EXTENSION] = Services(
        config, store, reader, live, outage_log,
        login_limiter=auth.LoginLimiter(config.login_max_failures, config.login_window_s))
    for blueprint in (auth.bp, pages.bp, api.bp, metrics.bp):
        app.register_blueprint(blueprint)
    app.after_request(_security_headers)
    outage.register(app, outage_log)
    filters.register(app)
    log.info("status page reading state store %s (prefix %s)", redact(config.state_url),
             config.prefix)
    return app
