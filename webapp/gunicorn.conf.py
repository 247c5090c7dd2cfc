"""gunicorn settings of the status page: ``gunicorn -c webapp/gunicorn.conf.py``
(``cuzk-tasks web`` runs exactly this).  Every knob reads its CUZK_WEB_* variable
(defaults and units in cuzk_tasks/defaults.py).

Worker class: ``gthread``.  Each open live stream (Server-Sent Events) holds one thread
that sleeps on a condition variable; the Redis event stream is read by ONE thread per
process and fanned out, so threads cost almost nothing while idle.  gthread needs no
monkey-patching (redis-py, prometheus-client and the Lua calls run unmodified), and its
main loop keeps notifying the arbiter while request threads block, so ``timeout`` never
kills a long-lived stream.  gevent would hold more streams per process but needs
monkey-patching of the whole app for a gain we do not need at tens of viewers.
"""

import os

from cuzk_tasks import defaults

bind = [os.environ.get("CUZK_WEB_BIND", "").strip() or defaults.WEB_BIND]
worker_class = "gthread"
workers = int(os.environ.get("CUZK_WEB_WORKERS", "") or defaults.WEB_WORKERS)
threads = int(os.environ.get("CUZK_WEB_THREADS", "") or defaults.WEB_THREADS)
# gthread: at most this many connections per worker (open streams + keep-alive)
worker_connections = max(1000, threads * 4)
timeout = int(os.environ.get("CUZK_WEB_TIMEOUT_S", "") or defaults.WEB_TIMEOUT_S)
graceful_timeout = 5          # open streams are cut on restart; browsers reconnect
keepalive = 5
wsgi_app = "webapp:create_app()"
proc_name = "cuzk-web"
accesslog = None              # no access log by default (tokens never appear in URLs anyway)
errorlog = "-"
loglevel = os.environ.get("CUZK_WEB_LOGLEVEL", "info")
forwarded_allow_ips = os.environ.get("CUZK_WEB_FORWARDED_ALLOW_IPS", "127.0.0.1")
