"""Settings of the status page: the service's Settings plus ``CUZK_WEB_*`` (cuzk_tasks/settings/defaults.py)."""

from __future__ import annotations

import dataclasses
import os

from cuzk_tasks.settings import defaults
from cuzk_tasks.settings.config import load_settings
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
    threads: int = defaults.WEB_THREADS
    sse_max_streams: int | None = defaults.WEB_SSE_MAX_STREAMS
    sse_max_streams_per_client: int = defaults.WEB_SSE_MAX_STREAMS_PER_CLIENT
    sse_retry_after_s: int = defaults.WEB_SSE_RETRY_AFTER_S
    login_max_failures: int = defaults.WEB_LOGIN_MAX_FAILURES
    login_window_s: float = defaults.WEB_LOGIN_WINDOW_S
    publish: str | None = defaults.WEB_PUBLISH

    def __post_init__(self):
        limit = self.threads - defaults.WEB_SPARE_THREADS
        if self.sse_max_streams is not None and not 0 <= self.sse_max_streams <= max(limit, 0):
            raise ConfigError(
                f"CUZK_WEB_SSE_MAX_STREAMS={self.sse_max_streams}: expected 0..{max(limit, 0)}, "
                f"each live stream holds one of the CUZK_WEB_THREADS={self.threads} threads and "
                f"{defaults.WEB_SPARE_THREADS} must stay free for /healthz and /api/status")
        if self.sse_max_streams_per_client < 1:
            raise ConfigError("CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT: expected at least 1, "
                              f"got {self.sse_max_streams_per_client}")

    @property
    def stream_cap(self) -> int:
        """Live streams this process serves at once (``sse_max_streams``, None = half the threads)."""
        if self.sse_max_streams is not None:
            return self.sse_max_streams
        return max(0, min(self.threads // 2, self.threads - defaults.WEB_SPARE_THREADS))

    @property
    def published_beyond_loopback(self) -> bool:
        """Whether other hosts can reach the page: the address compose publishes it on
        (``publish``), else the host of ``bind`` (a unix socket is local)."""
        if self.publish:
            host = self.publish
        elif self.bind.startswith("unix:"):
            return False
        else:
            host = self.bind.rpartition(":")[0] if ":" in self.bind else self.bind
        host = host.strip().strip("[]").lower()
        return not (host in ("localhost", "::1") or host.startswith("127."))

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
    ("threads", "CUZK_WEB_THREADS", int),
    ("sse_max_streams", "CUZK_WEB_SSE_MAX_STREAMS", int),
    ("sse_max_streams_per_client", "CUZK_WEB_SSE_MAX_STREAMS_PER_CLIENT", int),
    ("sse_retry_after_s", "CUZK_WEB_SSE_RETRY_AFTER_S", int),
    ("login_max_failures", "CUZK_WEB_LOGIN_MAX_FAILURES", int),
    ("login_window_s", "CUZK_WEB_LOGIN_WINDOW_S", float),
    ("publish", "CUZK_WEB_PUBLISH", str),
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
