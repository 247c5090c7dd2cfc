"""The task-message templates the tests build wire messages from: rendered by Celery, as a
worker renders them (cuzk_tasks/message_templates.py), on an app with the default settings."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def _app():
    from cuzk_tasks.celery_app import create_app
    from cuzk_tasks.config import load_settings

    return create_app(load_settings(env={}))


@functools.lru_cache(maxsize=None)
def template(task: str):
    """``task``'s :class:`cuzk_tasks.wire.EnvelopeTemplate`."""
    from cuzk_tasks.message_templates import render

    return render(_app(), task)
