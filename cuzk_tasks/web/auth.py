"""Who may read the status page: a bearer token (or the session cookie a login with it
sets), HTTP basic auth, or nobody when neither is configured (WebConfig.auth_enabled).
/healthz, /static/ and /login are always open; /metrics too with ``metrics_public``.

/login: its form carries a CSRF value (an HMAC, keyed by the token, of a random value in a
cookie: every web process checks it without shared state); failed sign-ins are limited per
client address (:class:`LoginLimiter`, per process); ``next`` is only ever a local path
(:func:`safe_next`)."""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import math
import secrets
import threading
import time

from flask import Blueprint, jsonify, make_response, redirect, render_template, request, url_for

from .services import get_services

COOKIE = "cuzk_web_session"
CSRF_COOKIE = "cuzk_web_csrf"
#: the login form is a few hundred bytes: a larger body is refused (413) without reading it
LOGIN_MAX_BODY = 4096

bp = Blueprint("auth", __name__)


def session_value(token: str) -> str:
    """The cookie a login with ``token`` sets (an HMAC of it: the cookie is not the token)."""
    return hmac.new(token.encode(), b"cuzk-web-session-v1", hashlib.sha256).hexdigest()


def csrf_field(token: str, nonce: str) -> str:
    """The form value that goes with the CSRF cookie ``nonce``: an HMAC keyed by the token,
    so another site can neither read nor forge it, and any web process can check it."""
    key = hmac.new(token.encode(), b"cuzk-web-csrf-v1", hashlib.sha256).digest()
    return hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()


def safe_next(value) -> str:
    r"""``value`` when it is a path on this site, else "/".  Browsers drop tabs and newlines
    inside URLs and read "\" as "/", so "/\t/evil" or "/\evil" would leave the site ("//evil"
    is a network-path reference): any control character or backslash is refused."""
    value = str(value or "")
    if (not value.startswith("/") or value.startswith("//") or "\\" in value
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)):
        return "/"
    return value


class LoginLimiter:
    """Failed sign-ins per client address in a sliding window, in this process (the page
    writes nothing to Redis).  ``max_clients`` bounds the memory a spray of addresses takes."""

    def __init__(self, max_failures: int, window_s: float, max_clients: int = 10000):
        self.max_failures, self.window_s, self.max_clients = max_failures, window_s, max_clients
        self._lock = threading.Lock()
        self._failures: dict[str, collections.deque] = {}

    def _recent(self, client, now):
        times = self._failures.get(client)
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if times is not None and not times:
            del self._failures[client]
            return None
        return times

    def retry_after(self, client) -> int:
        """0 when ``client`` may try now, else the seconds until it may."""
        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now)
            if times is None or len(times) < self.max_failures:
                return 0
            return max(1, math.ceil(times[0] + self.window_s - now))

    def failed(self, client):
        now = time.monotonic()
        with self._lock:
            if client not in self._failures and len(self._failures) >= self.max_clients:
                for other in list(self._failures):  # drop the expired ones, else the oldest
                    self._recent(other, now)
                if len(self._failures) >= self.max_clients:
                    self._failures.pop(next(iter(self._failures)))
            self._failures.setdefault(client, collections.deque()).append(now)


def authorised(config) -> bool:
    if not config.auth_enabled:
        return True
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if config.token:
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                              config.token.encode()):
            return True
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), session_value(config.token).encode()):
            return True
    if config.user and config.password and scheme.lower() == "basic":
        try:
            user, _, pw = base64.b64decode(value.strip()).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return (hmac.compare_digest(user.encode(), config.user.encode())
                & hmac.compare_digest(pw.encode(), config.password.encode()))
    return False


def _open_path(path, config) -> bool:
    return (path == "/healthz" or path.startswith("/static/") or path == "/login"
            or (path == "/metrics" and config.metrics_public))


@bp.before_app_request
def check_auth():
    config = get_services().config
    if _open_path(request.path, config) or authorised(config):
        return None
    path = request.path
    wants_html = request.method == "GET" and not path.startswith(("/api/", "/metrics")) \
        and "text/html" in request.headers.get("Accept", "")
    if wants_html and config.token:
        return redirect(url_for("auth.login", next=path))
    resp = jsonify({"error": "authentication required"})
    resp.status_code = 401
    challenges = []
    if config.user and config.password:
        challenges.append('Basic realm="cuzk-tasks", charset="UTF-8"')
    if config.token:
        challenges.append('Bearer realm="cuzk-tasks"')
    resp.headers["WWW-Authenticate"] = ", ".join(challenges)
    return resp


def _login_form(config, nxt, error=None, status=200):
    """The form with a fresh CSRF cookie and its field."""
    nonce = secrets.token_urlsafe(24)
    resp = make_response(render_template("login.html", next=nxt, error=error,
                                         csrf=csrf_field(config.token, nonce)), status)
    resp.set_cookie(CSRF_COOKIE, nonce, httponly=True, samesite="Strict",
                    secure=request.is_secure, path=url_for("auth.login"))
    return resp


def _too_many(wait_s):
    resp = make_response(render_template("login.html", next="/", csrf="",
                                         error="too many failed sign-ins: try again later"), 429)
    resp.headers["Retry-After"] = str(wait_s)
    return resp


@bp.route("/login", methods=["GET", "POST"])
def login():
    services = get_services()
    config = services.config
    if not config.token:
        return redirect(url_for("pages.index"))
    nxt = safe_next(request.args.get("next", "/"))
    if request.method == "GET":
        return _login_form(config, nxt)
    client = request.remote_addr
    wait_s = services.login_limiter.retry_after(client)
    if wait_s:
        return _too_many(wait_s)
    # read no body that is streamed (chunked) or large: a slow one would hold a thread
    if request.content_length is None:
        return "a Content-Length is required", 411
    if request.content_length > LOGIN_MAX_BODY:
        return "request body too large", 413
    nxt = safe_next(request.form.get("next", nxt))
    nonce = request.cookies.get(CSRF_COOKIE, "")
    if not nonce or not hmac.compare_digest(request.form.get("csrf", "").encode(),
                                            csrf_field(config.token, nonce).encode()):
        services.login_limiter.failed(client)
        return _login_form(config, nxt, "the form expired: sign in again", 400)
    if not hmac.compare_digest(request.form.get("token", "").encode(), config.token.encode()):
        services.login_limiter.failed(client)
        return _login_form(config, nxt, "wrong token", 401)
    resp = redirect(nxt)
    resp.set_cookie(COOKIE, session_value(config.token), httponly=True,
                    samesite="Strict", secure=request.is_secure, path="/")
    resp.delete_cookie(CSRF_COOKIE, path=url_for("auth.login"))
    return resp
