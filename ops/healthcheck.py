#!/usr/bin/env python3
"""Container/host health check of a cuzk-tasks process (the images' HEALTHCHECK).

    cuzk-healthcheck                 # auto: look at what this container runs
    cuzk-healthcheck web [URL]       # GET URL (default http://127.0.0.1:<CUZK_WEB_BIND port>/healthz)
    cuzk-healthcheck worker [--pid PID]  # this host's worker has a live heartbeat in Redis

``worker`` is healthy when the worker's own heartbeat key (``{prefix}:hb:{worker_id}``)
exists: the worker process is alive, its heartbeat thread runs, and it can reach Redis
with the configured URL and password.  The worker id is derived exactly as the worker
derives it (``<host>:dev<N>`` or ``<host>:cpu:<main pid>``).  Anything that is not a web
or worker process (one-shot ``submit``, ``status``) is reported healthy.

Exit 0 healthy, 1 unhealthy.  Messages never contain the Redis URL (it holds the password).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def _cmdline(pid) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _ppid(pid) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _runs_cuzk_tasks(argv) -> bool:
    """The process itself runs cuzk-tasks: its program is the Python interpreter (the console
    script's shebang, ``python -m cuzk_tasks``) or the script.  An init process that only
    carries the command line of its child (docker-init/tini under compose ``init: true``,
    PID 1: ``docker-init -- cuzk-tasks worker --cpu``) or a shell wrapper is not."""
    if not argv:
        return False
    program = os.path.basename(argv[0])
    return program.startswith("python") or program == "cuzk-tasks"


def _is_worker(argv) -> bool:
    return (_runs_cuzk_tasks(argv) and "worker" in argv
            and ("--cpu" in argv or "--device" in argv))


def find_worker_main(pids=None):
    """(pid, argv) of the main process of a ``cuzk-tasks worker``: not a pool child (whose
    parent is the main process) and not an init process in front of it."""
    if pids is None:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in sorted(pids):
        argv = _cmdline(pid)
        if _is_worker(argv) and not _is_worker(_cmdline(_ppid(pid))):
            return pid, argv
    return None, []


def detect_role() -> str:
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        argv = _cmdline(pid)
        if _is_worker(argv):
            return "worker"
        if "web" in argv or any("gunicorn" in a for a in argv):
            return "web"
    return "none"


def check_web(url=None) -> tuple[bool, str]:
    if url is None:
        bind = os.environ.get("CUZK_WEB_BIND", "").strip() or "127.0.0.1:8080"
        port = bind.rsplit(":", 1)[-1]
        url = f"http://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=4) as resp:
            return resp.status == 200, f"{url}: HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: HTTP {exc.code}"
    except OSError as exc:
        return False, f"{url}: {exc.__class__.__name__}: {exc}"


def worker_id_for(settings, argv, pid) -> str:
    if "--device" in argv:
        device = argv[argv.index("--device") + 1]
        return settings.device_worker_id(int(device))
    return settings.cpu_worker_id(pid=pid)


def slot_host(client, keys, settings, pid):
    """The host name the worker ``pid`` claimed from its host-slot group (settings.host_slot),
    found by its holder text (cuzk_tasks.service.worker.slot_holder), or None."""
    import socket

    from cuzk_tasks.settings import defaults

    holder = f"{socket.gethostname()}:{pid}"
    group = settings.host_slot
    held = client.mget([keys.host_slot(group, n) for n in range(defaults.HOST_SLOTS_MAX)])
    for n, value in enumerate(held):
        if value is not None and value.decode(errors="replace") == holder:
            return f"{group}-{n}"
    return None


def check_worker(pid=None, argv=None) -> tuple[bool, str]:
    import dataclasses

    from cuzk_tasks.settings.config import load_settings
    from cuzk_tasks.state.keys import Keys

    if pid is None:
        pid, argv = find_worker_main()
        if pid is None:
            return False, "no cuzk-tasks worker process found"
    elif argv is None:
        argv = _cmdline(pid)
    settings = load_settings()
    keys = Keys(settings.prefix)
    try:
        from cuzk_tasks.settings.redis_url import client as redis_client

        client = redis_client(settings.state_url, settings.sentinel_master, socket_timeout=3,
                              socket_connect_timeout=3)
        if settings.host_slot:
            host = slot_host(client, keys, settings, pid)
            if host is None:
                return False, f"worker pid {pid}: holds no slot of host_slot {settings.host_slot!r}"
            settings = dataclasses.replace(settings, hostname=host)
        worker_id = worker_id_for(settings, argv, pid)
        alive = bool(client.exists(keys.hb(worker_id)))
    except Exception as exc:  # never echo the URL: it carries the password
        return False, f"redis: {exc.__class__.__name__}: {exc}"
    return alive, f"worker {worker_id}: heartbeat {'present' if alive else 'MISSING'}"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    role = argv.pop(0) if argv else detect_role()
    if role == "web":
        ok, msg = check_web(argv[0] if argv else None)
    elif role == "worker":
        pid = int(argv[argv.index("--pid") + 1]) if "--pid" in argv else None
        ok, msg = check_worker(pid)
    elif role == "none":
        ok, msg = True, "no long-running cuzk-tasks process here"
    else:
        print(f"usage: cuzk-healthcheck [web [URL] | worker [--pid PID]]", file=sys.stderr)
        return 2
    print(("OK " if ok else "UNHEALTHY ") + msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
