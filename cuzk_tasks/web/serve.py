"""Start the status page under gunicorn (``cuzk-tasks web``, ``cuzk-tasks demo``)."""

from __future__ import annotations

import os
import pathlib
import sys

from cuzk_tasks.errors import ConfigError

from .config import load_web_config

CONF = pathlib.Path(__file__).resolve().parent / "gunicorn.conf.py"


def gunicorn_argv() -> list[str]:
    """The command that serves the app: gunicorn with cuzk_tasks/web/gunicorn.conf.py."""
    return [sys.executable, "-m", "gunicorn", "-c", str(CONF)]


def web_env(base=None, bind=None, workers=None, redis_url=None, config=None) -> dict:
    env = dict(os.environ if base is None else base)
    if bind:
        env["CUZK_WEB_BIND"] = bind
    if workers:
        env["CUZK_WEB_WORKERS"] = str(workers)
    if config:
        env["CUZK_CONFIG"] = str(config)
    if redis_url:
        for name in ("CUZK_REDIS_URL", "CUZK_STATE_URL"):
            env[name] = redis_url
    # the package must be importable by gunicorn's app loader: the folder that holds cuzk_tasks/
    root = str(CONF.parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def check_exposure(config) -> None:
    """Refuse to serve the page, which hands out proofs and job data, where other hosts
    reach it without a token or basic auth: ``CUZK_WEB_PUBLISH`` (what docker compose
    publishes), else the host of ``CUZK_WEB_BIND``.  Raises ConfigError naming what to set."""
    if config.published_beyond_loopback and not config.auth_enabled:
        what = (f"CUZK_WEB_PUBLISH={config.publish}" if config.publish
                else f"CUZK_WEB_BIND={config.bind}")
        raise ConfigError(
            f"{what}: the status page would be reachable from other hosts without "
            "authentication; set CUZK_WEB_TOKEN (or CUZK_WEB_USER and CUZK_WEB_PASSWORD), or "
            "use 127.0.0.1 (ops/runbook.md: Publishing the status page and monitoring)")


def exec_gunicorn(**kwargs):
    """Replace this process with gunicorn (signals then go straight to its arbiter), after
    the page's settings load (a bad CUZK_WEB_* fails here, once, with its message) and pass
    :func:`check_exposure`."""
    env = web_env(**kwargs)
    check_exposure(load_web_config(env))
    argv = gunicorn_argv()
    os.execve(argv[0], argv, env)
