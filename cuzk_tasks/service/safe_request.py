"""SafeRequest: no message can crash a worker's main process.

A Celery worker's MAIN process decodes each message and pickles its arguments to hand the
task to a pool process (``Request.execute_using_pool`` -> billiard).  A by-name submit whose
input nested 500 lists deep made that pickling raise RecursionError there: the main process
died, its message went back on the queue, and the next worker to take it died the same way.

Every task of ours uses this Request class (``Task.Request``, tasks.py).  Before the hand-off
it bounds the message (:func:`cuzk_tasks.pipeline.request_checks.message_problem`: body size,
nesting depth, the by-name requests' fields) and checks a stage message's seal
(:mod:`cuzk_tasks.service.seal`: one the service did not issue, or altered), and a message
that fails either -- or whose hand-off raises anyway -- is refused ONCE (:meth:`SafeRequest.refuse`): acknowledged
(never requeued, so neither the broker nor the sweeper's request leases bring it back),
recorded in the state store as a rejected request with its reason, its failure stored for
the caller (``AsyncResult.get()`` raises with the reason instead of waiting), and logged in
one line.  Nothing of it reaches a pool process.

A by-name request is handed to its CPU worker's request lane (:mod:`.request_lane`: threads
of the main process) instead of the prefork pool, so it never waits for a pool process.

Celery builds, per task, a subclass of this class whose ``execute_using_pool`` is its own
fast copy (``celery.worker.request.create_request_cls``): :meth:`SafeRequest.__init_subclass__`
wraps that one too.
"""

from __future__ import annotations

import functools
import inspect
import logging

from celery.exceptions import TaskRevokedError
from celery.worker.request import Request
from celery.worker.state import task_ready
from celery.worker.strategy import default as default_strategy
from kombu.exceptions import DecodeError

from ..errors import CuzkError
from ..pipeline import request_checks
from .request_lane import request_pool
from .task_names import REQUEST_TASKS, STAGE_TASKS

log = logging.getLogger("cuzk_tasks.service.safe_request")

#: task name -> the signature its by-name arguments bind to (the task function's, less self)
_signatures: dict = {}


def _signature(task):
    sig = _signatures.get(task.name)
    if sig is None:
        try:
            sig = inspect.signature(task.run)  # bound: ``self`` is not a parameter
        except (TypeError, ValueError):
            return None
        _signatures[task.name] = sig
    return sig


def _guarded(hand_off):
    """``execute_using_pool`` that bounds the message first and refuses it instead of
    handing it over when it is out of bounds or the hand-off raises."""

    @functools.wraps(hand_off)
    def execute_using_pool(self, pool, **kwargs):
        try:
            body = self.body
            problem = request_checks.message_problem(
                self.name, self.args, self.kwargs, len(body) if body is not None else 0,
                _signature(self.task))
            if problem is None and self.name in STAGE_TASKS:
                problem = _stage_seal(self.task).problem(self.name, self.args, self.kwargs)
        except Exception as exc:  # a message this check cannot even read is refused too
            problem = f"{self.name}: unreadable message ({type(exc).__name__}: {exc})"
        if problem is None:
            # a CPU worker's by-name requests: its request lane's threads, through Celery's
            # generic hand-off (the per-task copy, hand_off, is bound to the worker's pool)
            lane = request_pool(self.task.app) if self.name in REQUEST_TASKS else None
            try:
                if lane is not None:
                    return Request.execute_using_pool(self, lane, **kwargs)
                return hand_off(self, pool, **kwargs)
            except TaskRevokedError:
                raise
            except Exception as exc:
                problem = (f"{self.name}: the worker could not hand it to a pool process "
                           f"({type(exc).__name__}: {str(exc)[:200]})")
        self.refuse(problem)
        # the worker releases the slot it took for this message on exactly this exception
        # (WorkController._process_task); nothing else sees it
        raise TaskRevokedError(problem)

    return execute_using_pool


class SafeRequest(Request):
    """A Celery Request that bounds its message before the pool gets it (module docstring)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("execute_using_pool")
        if own is not None and not getattr(own, "_cuzk_guarded", False):
            cls.execute_using_pool = _guarded(own)
            cls.execute_using_pool._cuzk_guarded = True

    def refuse(self, reason: str) -> None:
        """Reject this message once, for ``reason``: out of the worker's registry (its
        heartbeat no longer reports it held), recorded (:func:`_record`), acknowledged
        without requeue."""
        task_ready(self)
        _record(self.task, self.name, self.id, reason, store_result=self.store_errors)
        self.reject(requeue=False)


def _stage_seal(task):
    """The stage key's seal of this worker (its pipeline context's; loaded once)."""
    # lazy, as in _record: the consumer has the pipeline loaded already
    from ..pipeline import context

    return context(task.app).messages.seal


def _record(task, name, task_id, reason, store_result=True) -> None:
    """A refused message of ``task``: one log line, a rejected request in the state store and
    (``store_result``: by-name requests store results) its failure for the caller.  Each step
    is attempted even when another fails."""
    log.error("refused %s[%s], not run: %s", name, task_id, reason)
    try:
        # lazy: the pipeline's context is the worker's; this module is loaded only by a
        # worker's consumer (Celery resolves it by name), which has the pipeline already
        from ..pipeline import context

        ctx = context(task.app)
        ctx.store.reject_request(name, task_id, reason, worker=ctx.worker_id or "")
    except Exception:
        log.exception("refused %s[%s]: could not record it in the state store", name, task_id)
    if store_result and task_id:
        try:
            # request=None: no chord, no errbacks of a message we refuse to run
            task.backend.mark_as_failure(task_id, CuzkError(reason), request=None)
        except Exception:
            log.exception("refused %s[%s]: could not store its failure for the caller",
                          name, task_id)


def safe_strategy(task, app, consumer, **kwargs):
    """Celery's default strategy (``Task.Strategy``) for ``task``, plus: a message whose body
    cannot be decoded -- JSON nested deeper than the decoder's recursion limit -- is
    recorded (:func:`_record`) before Celery drops it (it acks a message it cannot decode),
    so the caller's ``.get()`` raises with the reason instead of waiting for ever."""
    handler = default_strategy(task, app, consumer, **kwargs)

    def on_message(message, body, ack, reject, callbacks, **more):
        try:
            return handler(message, body, ack, reject, callbacks, **more)
        except DecodeError as exc:
            headers = getattr(message, "headers", None) or {}
            _record(task, task.name, headers.get("id"),
                    f"{task.name}: the message's body cannot be decoded ({str(exc)[:200]})",
                    store_result=not task.ignore_result)
            raise

    return on_message


SafeRequest.execute_using_pool = _guarded(Request.execute_using_pool)
SafeRequest.execute_using_pool._cuzk_guarded = True
