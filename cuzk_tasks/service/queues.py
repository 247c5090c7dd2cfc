"""Where a Celery queue's messages wait in Redis, as kombu's Redis transport keeps them with
its default settings: one list per priority step, ``<queue>`` for step 0 and
``<queue>\\x06\\x16<step>`` for the others (steps 0, 3, 6, 9; 0 served first).  The service
uses kombu's defaults, so any Celery client reaches the workers with any message priority;
this module only names the lists, to read their depths (status page, the sweeper) --
Celery and kombu write them.  ``tests/test_queues.py`` checks the constants against kombu.

Imports neither Celery nor Redis.
"""

from __future__ import annotations

import re

from ..errors import CuzkError

#: kombu's default priority steps for the Redis transport (``Channel.priority_steps``)
PRIORITY_STEPS = (0, 3, 6, 9)
#: kombu's default separator between a queue name and its priority step (``Channel.sep``)
PRIORITY_SEP = "\x06\x16"

# queue names end up in Redis keys and log lines: a plain alphabet
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:@-]+$")


def check_queue_name(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE_NAME.match(queue):
        raise CuzkError(f"queue name {queue!r:.200}: expected letters, digits and . _ : @ - only")
    return queue


def priority_step(priority: int) -> int:
    """The step a message of ``priority`` (0-9) waits on: the largest step <= priority."""
    priority = int(priority)
    return max([s for s in PRIORITY_STEPS if s <= priority] or [PRIORITY_STEPS[0]])


def queue_list_key(queue: str, priority: int) -> str:
    """The Redis list a message of ``priority`` on ``queue`` waits in."""
    step = priority_step(priority)
    return queue if step == 0 else f"{queue}{PRIORITY_SEP}{step}"


def queue_keys(queue: str) -> list[str]:
    """Every Redis list of ``queue`` (one per priority step), in the order they are served."""
    return [queue_list_key(queue, step) for step in PRIORITY_STEPS]
