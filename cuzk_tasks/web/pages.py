"""The pages for a person: the live status page (/) and one job (/jobs/<id>)."""

from __future__ import annotations

from flask import Blueprint, abort, render_template

from .api import job_document, page_args
from .services import get_services

bp = Blueprint("pages", __name__)


@bp.get("/")
def index():
    services = get_services()
    status, body, _ = services.reader.get()
    # JSON inside <script>: < > & only occur in strings, where \uXXXX is the same text
    safe_json = (body.decode().replace("<", "\\u003c").replace(">", "\\u003e")
                 .replace("&", "\\u0026"))
    return render_template("index.html", s=status, status_json=safe_json,
                           poll_ms=services.config.poll_interval_ms)


@bp.get("/jobs/<job_id>")
def job(job_id):
    try:
        offset, limit = page_args()
    except ValueError:
        abort(400)
    doc = job_document(job_id, offset, limit)
    if doc is None:
        abort(404)
    return render_template("job.html", d=doc)
