"""What the status page's views reach, the way Flask's tutorial reaches its database.

:func:`create_app` builds one :class:`Services` per app and keeps it in
``app.extensions["cuzk"]``; a view asks for it with :func:`get_services` (or the store
alone with :func:`get_store`).  Nothing here is a module global: two apps in one process
(the tests make many) never share a store or a cache.
"""

from __future__ import annotations

import dataclasses

from flask import current_app

EXTENSION = "cuzk"


@dataclasses.dataclass
class Services:
    config: object  # cuzk_tasks.web.config.WebConfig
    store: object  # cuzk_tasks.state.StateStore, read only
    reader: object  # cuzk_tasks.web.status.StatusReader: the cached /api/status document
    live: object  # cuzk_tasks.web.live.Broadcaster: the /api/events fan-out
    outage: object  # cuzk_tasks.web.outage.OutageLog
    login_limiter: object = None  # cuzk_tasks.web.auth.LoginLimiter: failed sign-ins per client
    metrics_registry: object = None  # prometheus registry, made at the first scrape


def get_services() -> Services:
    return current_app.extensions[EXTENSION]


def get_store():
    return get_services().store
