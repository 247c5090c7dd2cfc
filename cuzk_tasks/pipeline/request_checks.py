"""The by-name requests' contract, checked field by field: what ``cuzk.submit``,
``cuzk.status`` and ``cuzk.result`` accept, and the bounds every message of a task of ours
must keep (nesting depth, body size) before a worker hands it to its pool.

Two callers: :func:`cuzk_tasks.pipeline.submit.submit_job` (every submit, whichever way it
comes) and :class:`cuzk_tasks.service.safe_request.SafeRequest` in a worker's MAIN process, which
checks a message before Celery pickles it for a pool process -- a message nested too deep
for the pickler once killed the main process, and with its message back on the queue, the
next worker too.  Every error names the field and what was expected.

Pure functions on JSON-decoded values: no Celery, no Redis, no recursion (a depth is
measured with an explicit stack, so a hostile value cannot exhaust Python's).
"""

from __future__ import annotations

from ..errors import CuzkError
from ..service.task_names import REQUEST_TASKS, TASK_CANCEL, TASK_RESULT, TASK_STATUS, TASK_SUBMIT
from ..settings import defaults

_CONTAINERS = (dict, list, tuple)

#: Nesting a by-name argument may have above an input's: ``partitions`` (a list) holds
#: partitions (objects) holding an input.
ARGUMENT_DEPTH = defaults.MAX_INPUT_DEPTH + 2

#: Longest circuit name and job id a request may name, characters.
MAX_NAME_CHARS = 200


def nesting_depth(value, limit: int) -> int:
    """How deep lists and objects nest in ``value`` (a scalar 0, ``[1]`` 1, ``[[1]]`` 2),
    counting no further than ``limit + 1``: enough to tell it is over."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        depth += 1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((c, depth) for c in children if isinstance(c, _CONTAINERS))
    return deepest if isinstance(value, _CONTAINERS) else 0


def _kind(value) -> str:
    return type(value).__name__


def check_input_depth(idx, value) -> None:
    """CuzkError unless partition ``idx``'s input object nests at most MAX_INPUT_DEPTH."""
    if isinstance(value, _CONTAINERS) and \
            nesting_depth(value, defaults.MAX_INPUT_DEPTH) > defaults.MAX_INPUT_DEPTH:
        raise CuzkError(f"partition {idx}: input: nested more than {defaults.MAX_INPUT_DEPTH} "
                        "levels deep (MAX_INPUT_DEPTH)")


def check_circuit(circuit) -> str:
    if not isinstance(circuit, str) or not circuit or len(circuit) > MAX_NAME_CHARS:
        raise CuzkError(f"circuit: expected a circuit name (a string of 1..{MAX_NAME_CHARS} "
                        f"characters), got {_kind(circuit)} {circuit!r:.80}")
    return circuit


def check_partitions_list(partitions) -> list:
    if not isinstance(partitions, (list, tuple)) or not partitions:
        shown = _kind(partitions) if isinstance(partitions, _CONTAINERS) else \
            f"{_kind(partitions)} {partitions!r:.80}"
        raise CuzkError(f"partitions: expected a non-empty list of partitions, got {shown}")
    return list(partitions)


def check_priority(priority) -> int | None:
    """None (the circuit's or the default) or an int 0..9; 3.7, "high" and True are refused."""
    if priority is None:
        return None
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise CuzkError(f"priority: expected an integer 0 (first) .. 9 (last), or none; got "
                        f"{_kind(priority)} {priority!r:.80}")
    return priority


def check_request_id(request_id) -> str | None:
    if request_id is None:
        return None
    if not isinstance(request_id, str) or not request_id \
            or len(request_id) > defaults.MAX_REQUEST_ID_CHARS:
        raise CuzkError(f"request_id: expected a string of 1..{defaults.MAX_REQUEST_ID_CHARS} "
                        f"characters, or none; got {_kind(request_id)} {request_id!r:.80}")
    return request_id


def check_details(details) -> bool:
    if not isinstance(details, bool):
        raise CuzkError(f"details: expected true or false, got {_kind(details)}")
    return details


def check_job_id(job_id) -> str:
    if not isinstance(job_id, str) or not job_id or len(job_id) > MAX_NAME_CHARS \
            or any(c.isspace() for c in job_id):
        raise CuzkError(f"job_id: expected a job id (a string without spaces), got "
                        f"{_kind(job_id)} {job_id!r:.80}")
    return job_id


def _check_shallow(task: str, arguments: dict) -> None:
    """The checks of a request's fields that read no settings and no nested value: what a
    worker's main process can afford on every message (the rest is submit_job's)."""
    if task == TASK_SUBMIT:
        check_circuit(arguments.get("circuit"))
        check_partitions_list(arguments.get("partitions"))
        check_priority(arguments.get("priority"))
        check_request_id(arguments.get("request_id"))
        on_done = arguments.get("on_done")
        if on_done is not None and not isinstance(on_done, dict):
            raise CuzkError(f"on_done: expected an object with the keys task and queue, got "
                            f"{_kind(on_done)}")
        deadline = arguments.get("deadline_s")
        if deadline is not None and (isinstance(deadline, bool)
                                     or not isinstance(deadline, (int, float))):
            raise CuzkError(f"deadline_s: expected seconds > 0 (or none), got {_kind(deadline)}")
        check_details(arguments.get("details", False))
    elif task in (TASK_STATUS, TASK_RESULT, TASK_CANCEL):
        check_job_id(arguments.get("job_id"))
    if task == TASK_CANCEL:
        reason = arguments.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_NAME_CHARS):
            raise CuzkError(f"reason: expected a string of at most {MAX_NAME_CHARS} characters, "
                            f"or none; got {_kind(reason)}"
                            + (f" of {len(reason)} characters" if isinstance(reason, str) else ""))


def message_problem(task: str, args, kwargs, body_size: int, signature=None) -> str | None:
    """Why a message of ``task`` must not reach a pool process, or None when it may.

    Every task of ours: a body of at most MAX_REQUEST_BYTES, no argument nested deeper than
    :data:`ARGUMENT_DEPTH`.  The by-name requests (``signature``: the task function's
    :class:`inspect.Signature`, to bind positional arguments) also: arguments the task takes,
    each of the type it needs (:func:`_check_shallow`).  The text names the task and field."""
    if body_size > defaults.MAX_REQUEST_BYTES:
        return (f"{task}: message of {body_size} bytes, over the limit of "
                f"{defaults.MAX_REQUEST_BYTES} (MAX_REQUEST_BYTES); pass inputs by input_ref")
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        return f"{task}: the message's args must be a list and its kwargs an object"
    arguments = None
    if task in REQUEST_TASKS and signature is not None:
        try:  # binding reads no nested value: safe before the depth is known
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError as exc:
            return f"{task}: {exc}"
        named = list(arguments.items())
    else:
        named = [(f"argument {i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    for name, value in named:
        if not isinstance(value, _CONTAINERS) or \
                nesting_depth(value, ARGUMENT_DEPTH) <= ARGUMENT_DEPTH:
            continue
        if name == "partitions" and isinstance(value, (list, tuple)):
            # name the partition: its input is what nests too deep (a partition object and
            # its input object come above the input's own levels)
            limit = defaults.MAX_INPUT_DEPTH + 1
            idx = next((i for i, p in enumerate(value) if isinstance(p, _CONTAINERS)
                        and nesting_depth(p, limit) > limit), None)
            if idx is not None:
                return (f"{task}: partition {idx}: input: nested more than "
                        f"{defaults.MAX_INPUT_DEPTH} levels deep (MAX_INPUT_DEPTH)")
        return (f"{task}: {name}: nested more than {ARGUMENT_DEPTH} levels deep (an input "
                f"may nest {defaults.MAX_INPUT_DEPTH}: MAX_INPUT_DEPTH)")
    if arguments is not None:
        try:
            _check_shallow(task, arguments)
        except CuzkError as exc:
            return f"{task}: {exc}"
    return None
