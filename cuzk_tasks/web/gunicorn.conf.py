"""gunicorn settings of the status page: ``gunicorn -c cuzk_tasks/web/gunicorn.conf.py``
(``cuzk-tasks web`` runs exactly this).  Every knob reads its CUZK_WEB_* variable
(defaults and units in cuzk_tasks/settings/defaults.py).

Worker class: ``cuzk_tasks.web.worker.StatusPageWorker``, gunicorn's ``gthread`` except that a
request reaches a thread only once it has fully arrived (slow clients hold a socket, never a
thread; ``CUZK_WEB_CLIENT_TIMEOUT_S``).  Live streams are capped per process below the thread
count (``CUZK_WEB_SSE_MAX_STREAMS``, cuzk_tasks/web/live.py), so threads stay free for /healthz.

Why gthread.  Each open live stream (Server-Sent Events) holds one thread
that sleeps on a condition variable; the Redis event stream is read by ONE thread per
process and fanned out, so threads cost almost nothing while idle.  gthread needs no
monkey-patching (redis-py, prometheus-client and the Lua calls run unmodified), and its
main loop keeps notifying the arbiter while request threads block, so ``timeout`` never
kills a long-lived stream.  gevent would hold more streams per process but needs
monkey-patching of the whole app for a gain we do not need at tens of viewers.

Defaults 2 processes x 128 threads: on 2 cores, 1 / 2 / 3 processes were measured
(docs/benchmarks-history.md, status page): 2 gave the lowest /api/status latency with live
streams open.  Requests cost one cached-bytes write each (cuzk_tasks/web/status.py), so more
threads than open streams do not matter; each process makes its first (full) read at
boot (``post_worker_init`` below), not in its first request.
"""

import os
import threading

from cuzk_tasks.settings import defaults

bind = [os.environ.get("CUZK_WEB_BIND", "").strip() or defaults.WEB_BIND]
worker_class = "cuzk_tasks.web.worker.StatusPageWorker"
workers = int(os.environ.get("CUZK_WEB_WORKERS", "") or defaults.WEB_WORKERS)
threads = int(os.environ.get("CUZK_WEB_THREADS", "") or defaults.WEB_THREADS)
# at most this many connections per worker (open streams, keep-alive, requests arriving);
# a connection that holds no thread costs a socket and a few bytes
worker_connections = max(1000, threads * 4)
timeout = int(os.environ.get("CUZK_WEB_TIMEOUT_S", "") or defaults.WEB_TIMEOUT_S)
graceful_timeout = 5          # open streams are cut on restart; browsers reconnect
keepalive = 5
wsgi_app = "cuzk_tasks.web:create_app()"
proc_name = "cuzk-web"
accesslog = None              # no access log by default (tokens never appear in URLs anyway)
errorlog = "-"
loglevel = os.environ.get("CUZK_WEB_LOGLEVEL", "").strip() or defaults.WEB_LOGLEVEL
forwarded_allow_ips = (os.environ.get("CUZK_WEB_FORWARDED_ALLOW_IPS", "").strip()
                       or defaults.WEB_FORWARDED_ALLOW_IPS)
# gunicorn >= 25 opens a control socket for `gunicornc` under $XDG_RUNTIME_DIR or
# $HOME/.gunicorn; in the image HOME (/opt/cuzk) is not writable by the service user, so
# every start logged "Control server error: Permission denied".  Nothing here uses it.
control_socket_disable = True


def post_worker_init(worker):
    """Make this process's first status read (a full read of every in-flight job: ~150 ms
    at 500 jobs x 16 partitions) now, in the background, instead of in the first request.
    Requests that arrive meanwhile share that read (single-flight); Redis being down is
    not an error here (the page reports it)."""
    # lazy: gunicorn's arbiter reads this file and never loads the app (Flask); this hook
    # runs in a worker process, which has
    from cuzk_tasks.web.services import EXTENSION

    services = getattr(worker.wsgi, "extensions", {}).get(EXTENSION)
    if services is None:
        return

    def warm():
        try:
            services.reader.get()
        except Exception:  # noqa: BLE001 - logged by the first request that needs it
            pass

    threading.Thread(target=warm, name="cuzk-web-warm", daemon=True).start()
