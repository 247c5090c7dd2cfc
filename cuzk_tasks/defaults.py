"""Every default setting of cuzk-tasks, with its unit and environment variable.

One place to look up what a knob does and what it is when unset.  Modules read
their defaults from here rather than hard-coding them.
"""

import os

from .errors import CuzkError

# --- proving library (cuzk_tasks.groth16) ---------------------------------

BACKEND = "auto"
"""Compute backend (env ``CUZK_BACKEND``): ``cpu``, ``gpu`` or ``auto`` (GPU when usable)."""

THREADS = None
"""Native CPU core threads (env ``CUZK_THREADS``, a count); None = all cores (os.cpu_count())."""

SELF_VERIFY = True
"""Check every proof with the pairing equation before returning it (bool).  ~15 ms per proof."""

MSM_WINDOW = None
"""Pippenger window in bits (env ``CUZK_MSM_WINDOW``, 2..22), read by the native core for tuning
only; None = chosen from the MSM size."""


def env_str(name, default):
    value = os.environ.get(name, "").strip()
    return value if value else default


def env_positive_int(name, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise CuzkError(f"environment variable {name} must be a positive integer, got {value!r}")
    return number


def backend_name():
    return env_str("CUZK_BACKEND", BACKEND).lower()


def thread_count():
    return env_positive_int("CUZK_THREADS", THREADS) or os.cpu_count() or 1
