"""Settings of the status page: the service's Settings plus ``CUZK_WEB_*`` (cuzk_tasks/defaults.py)."""

from __future__ import annotations

import dataclasses
import os
import re

from cuzk_tasks import defaults
from cuzk_tasks.config import load_settings
from cuzk_tasks.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class WebConfig:
    state_url: str = defaults.REDIS_URL
    sentinel_master: str = defaults.SENTINEL_MASTER
    prefix: str = defaults.PREFIX
    cpu_queue: str = defaults.CPU_QUEUE
    bind: str = defaults.WEB_BIND
    token: str | None = defaults.WEB_TOKEN
    user: str | None = defaults.WEB_USER
    password: str | None = defaults.WEB_PASSWORD
    metrics_public: bool = defaults.WEB_METRICS_PUBLIC
    sse_min_interval_ms: int = defaults.WEB_SSE_MIN_INTERVAL_MS
    sse_refresh_s: float = defaults.WEB_SSE_REFRESH_S
    sse_max_stream_s: float = defaults.WEB_SSE_MAX_STREAM_S
    poll_interval_ms: int = defaults.WEB_POLL_INTERVAL_MS
    cache_max_age_ms: int = defaults.WEB_CACHE_MAX_AGE_MS
    timeline_window_s: int = defaults.WEB_TIMELINE_WINDOW_S
    redis_timeout_s: float = defaults.WEB_REDIS_TIMEOUT_S

    @property
    def auth_enabled(self) -> bool:
        return bool(self.token) or bool(self.user and self.password)

    def replace(self, **changes) -> "WebConfig":
        return dataclasses.replace(self, **changes)


_ENV = [  # (field, env var, parse)
    ("bind", "CUZK_WEB_BIND", str),
    ("token", "CUZK_WEB_TOKEN", str),
    ("user", "CUZK_WEB_USER", str),
    ("password", "CUZK_WEB_PASSWORD", str),
    ("metrics_public", "CUZK_WEB_METRICS_PUBLIC", "bool"),
    ("sse_min_interval_ms", "CUZK_WEB_SSE_MIN_INTERVAL_MS", int),
    ("sse_refresh_s", "CUZK_WEB_SSE_REFRESH_S", float),
    ("sse_max_stream_s", "CUZK_WEB_SSE_MAX_STREAM_S", float),
    ("poll_interval_ms", "CUZK_WEB_POLL_INTERVAL_MS", int),
    ("cache_max_age_ms", "CUZK_WEB_CACHE_MAX_AGE_MS", int),
    ("timeline_window_s", "CUZK_WEB_TIMELINE_WINDOW_S", int),
    ("redis_timeout_s", "CUZK_WEB_REDIS_TIMEOUT_S", float),
]


def load_web_config(env=None, config_path=None) -> WebConfig:
    """Service settings (CUZK_CONFIG TOML + CUZK_* env) plus the CUZK_WEB_* variables."""
    env = os.environ if env is None else env
    settings = load_settings(config_path, env=env)
    values = {"state_url": settings.state_url, "sentinel_master": settings.sentinel_master,
              "prefix": settings.prefix,
              "cpu_queue": settings.cpu_queue}
    for name, var, parse in _ENV:
        raw = env.get(var, "").strip()
        if not raw:
            continue
        try:
            if parse == "bool":
                if raw.lower() not in ("0", "1", "true", "false", "yes", "no"):
                    raise ValueError(raw)
                values[name] = raw.lower() in ("1", "true", "yes")
            else:
                values[name] = parse(raw)
        except ValueError:
            raise ConfigError(f"environment variable {var}: cannot parse {raw!r}") from None
    return WebConfig(**values)


def redact_url(url: str) -> str:
    """``redis://user:secret@host`` -> ``redis://user:***@host`` (for logs and pages)."""
    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", str(url))
