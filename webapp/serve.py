"""Start the status page under gunicorn (``cuzk-tasks web``, ``cuzk-tasks demo``)."""

from __future__ import annotations

import os
import pathlib
import sys

CONF = pathlib.Path(__file__).resolve().parent / "gunicorn.conf.py"


def gunicorn_argv() -> list[str]:
    """The command that serves the app: gunicorn with webapp/gunicorn.conf.py."""
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
    # the package must be importable by gunicorn's app loader
    root = str(CONF.parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def exec_gunicorn(**kwargs):
    """Replace this process with gunicorn (signals then go straight to its arbiter)."""
    argv = gunicorn_argv()
    os.execve(argv[0], argv, web_env(**kwargs))
