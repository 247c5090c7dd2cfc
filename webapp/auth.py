"""Who may read the status page: a bearer token (or the session cookie a login with it
sets), HTTP basic auth, or nobody when neither is configured (WebConfig.auth_enabled).
/healthz, /static/ and /login are always open; /metrics too with ``metrics_public``."""

from __future__ import annotations

import base64
import hashlib
import hmac

from flask import Blueprint, jsonify, redirect, render_template, request, url_for

from .services import get_services

COOKIE = "cuzk_web_session"

bp = Blueprint("auth", __name__)


def session_value(token: str) -> str:
    """The cookie a login with ``token`` sets (an HMAC of it: the cookie is not the token)."""
    return hmac.new(token.encode(), b"cuzk-web-session-v1", hashlib.sha256).hexdigest()


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


@bp.route("/login", methods=["GET", "POST"])
def login():
    config = get_services().config
    if not config.token:
        return redirect(url_for("pages.index"))
    nxt = request.values.get("next", "/")
    if not nxt.startswith("/") or nxt.startswith("//"):
        nxt = "/"
    error = None
    if request.method == "POST":
        if hmac.compare_digest(request.form.get("token", "").encode(), config.token.encode()):
            resp = redirect(nxt)
            resp.set_cookie(COOKIE, session_value(config.token), httponly=True,
                            samesite="Strict", secure=request.is_secure, path="/")
            return resp
        error = "wrong token"
    return render_template("login.html", next=nxt, error=error), (401 if error else 200)
