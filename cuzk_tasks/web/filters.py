"""Jinja filters shared by the templates (the page's JS formats the same way)."""

from __future__ import annotations

import datetime
import zlib


def fmt_ms(v):
    if v is None or v == "":
        return "–"
    v = float(v)
    return f"{v:.0f} ms" if v < 1000 else f"{v / 1000:.2f} s"


def fmt_dur(s):
    if s is None or s == "":
        return "–"
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)}m {int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h {int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d {int(s % 86400 // 3600):02d}h"


def fmt_time(ts):
    if ts is None or ts == "":
        return "–"
    return datetime.datetime.fromtimestamp(float(ts), datetime.timezone.utc).strftime("%H:%M:%S")


def fmt_datetime(ts):
    if ts is None or ts == "":
        return "–"
    return datetime.datetime.fromtimestamp(float(ts), datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def job_hue(job_id):
    """The hue of a job's timeline bars (the page's JS uses the same CRC-32)."""
    return zlib.crc32(str(job_id or "").encode()) % 360


def register(app):
    for f in (fmt_ms, fmt_dur, fmt_time, fmt_datetime, job_hue):
        app.jinja_env.filters[f.__name__] = f
