"""By-name requests checked field by field (issue 24): cuzk_tasks/pipeline/request_checks.py (the bounds
a worker's main process applies before its pool gets a message), submit_job's own checks,
on_done.queue, the request-id digest, and SafeRequest refusing a message in-process.

A real redis-server for the state store and the result backend; the end-to-end case (a real
worker that must survive a poison message) is in tests/test_pipeline_e2e.py.
"""

from __future__ import annotations

import inspect
import json
import pathlib
import uuid

import pytest
from support.processes import write_circuits_toml

from cuzk_tasks.settings import defaults
from cuzk_tasks import pipeline
from cuzk_tasks.pipeline import request_checks
from cuzk_tasks.celery_app import create_app
from cuzk_tasks.settings.config import load_settings
from cuzk_tasks.errors import CuzkError
from cuzk_tasks.service.task_names import TASK_CANCEL, TASK_PROVE, TASK_RESULT, TASK_SUBMIT

FIX = pathlib.Path(__file__).resolve().parent / "fixtures"


def nest(levels, leaf="1"):
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture
def ctx(redis_server_url, tmp_path):
    prefix = "rq" + uuid.uuid4().hex[:8]
    config = write_circuits_toml(tmp_path / "cuzk.toml", {"mulchain": ("test-mul", FIX / "mulchain")})
    settings = load_settings(config, env={
        "CUZK_REDIS_URL": redis_server_url, "CUZK_PREFIX": prefix, "CUZK_HOSTNAME": "rqhost",
        "CUZK_SPOOL_DIR": str(tmp_path / "spool"), "CUZK_CPU_QUEUE": f"{prefix}.cpu",
        "CUZK_MAX_INLINE_INPUT_BYTES": "4096"})
    return pipeline.Context(create_app(settings), settings, worker_id="rqhost:cpu:1")


def _jobs(ctx):
    return ctx.store.redis.zrange(ctx.store.keys.jobs_active(), 0, -1) + \
        ctx.store.redis.zrange(ctx.store.keys.jobs_recent(), 0, -1)


# --- the bounds of a message, as a worker's main process applies them -----------------------

def test_nesting_depth_counts_lists_and_objects_without_recursing():
    depth = request_checks.nesting_depth
    assert depth("x", 5) == 0 and depth([], 5) == 1 and depth({"a": [["1"]]}, 5) == 3
    assert depth([1, [2, [3]], {"a": {}}], 5) == 3
    # far deeper than Python's recursion limit: measured, never a RecursionError
    assert depth(nest(100_000), 40) == 41


def _submit_signature():
    from cuzk_tasks.service import tasks

    return inspect.signature(tasks.submit.run)


@pytest.mark.parametrize("args, kwargs, needle", [
    ((), {"circuit": "c", "partitions": [{"input": {"a": nest(500), "b": "11"}}]},
     "cuzk.submit: partition 0: input: nested more than 32 levels deep (MAX_INPUT_DEPTH)"),
    (("c", [{"input": {"a": "1"}}, {"input": {"a": nest(40)}}]), {},
     "cuzk.submit: partition 1: input: nested more than"),
    ((), {"circuit": "c", "partitions": 5}, "cuzk.submit: partitions: expected a non-empty list"),
    ((), {"circuit": "c", "partitions": {"input": {}}}, "partitions: expected a non-empty list"),
    ((), {"circuit": "c", "partitions": [], }, "partitions: expected a non-empty list"),
    ((), {"circuit": ["c"], "partitions": ["x.json"]}, "cuzk.submit: circuit: expected a circuit name"),
    ((), {"circuit": "c", "partitions": ["x.json"], "priority": "high"},
     "cuzk.submit: priority: expected an integer 0 (first) .. 9 (last)"),
    ((), {"circuit": "c", "partitions": ["x.json"], "priority": 3.7}, "priority: expected an integer"),
    ((), {"circuit": "c", "partitions": ["x.json"], "priority": True}, "priority: expected an integer"),
    ((), {"circuit": "c", "partitions": ["x.json"], "priority": 10}, "priority: expected an integer"),
    ((), {"circuit": "c", "partitions": ["x.json"], "request_id": 7}, "request_id: expected a string"),
    ((), {"circuit": "c", "partitions": ["x.json"], "on_done": "svc.done"}, "on_done: expected an object"),
    ((), {"circuit": "c", "partitions": ["x.json"], "deadline_s": "soon"}, "deadline_s: expected seconds"),
    ((), {"circuit": "c", "partitions": ["x.json"], "colour": "red"},
     "cuzk.submit: got an unexpected keyword argument 'colour'"),
    ((), {"partitions": ["x.json"]}, "cuzk.submit: missing a required argument: 'circuit'"),
])
def test_a_bad_submit_message_is_refused_naming_its_field(args, kwargs, needle):
    problem = request_checks.message_problem(TASK_SUBMIT, args, kwargs, 100, _submit_signature())
    assert problem is not None and problem.startswith(TASK_SUBMIT + ": ") and needle in problem, \
        problem


def test_a_good_submit_message_passes_and_other_tasks_are_bounded_too():
    from cuzk_tasks.service import tasks

    good = {"circuit": "c", "partitions": [{"input": {"a": nest(defaults.MAX_INPUT_DEPTH - 1)}}],
            "priority": 0, "request_id": "r", "on_done": {"task": "t", "queue": "q"}, "deadline_s": 5}
    assert request_checks.message_problem(TASK_SUBMIT, (), good, 100, _submit_signature()) is None
    big = defaults.MAX_REQUEST_BYTES + 1
    assert "MAX_REQUEST_BYTES" in request_checks.message_problem(TASK_SUBMIT, (), good, big,
                                                                 _submit_signature())
    assert request_checks.message_problem(
        TASK_RESULT, (), {"job_id": ["j"]}, 10, inspect.signature(tasks.result.run)
    ).startswith("cuzk.result: job_id: expected a job id")
    # a stage task: its arguments are ours, only the bounds apply
    problem = request_checks.message_problem(TASK_PROVE, ("j", 0, 0, "c", nest(60)), {}, 10)
    assert problem.startswith("cuzk.prove: argument 4: nested more than")


@pytest.mark.parametrize("kwargs, needle", [
    ({"job_id": 7}, "cuzk.cancel: job_id: expected a job id"),
    ({"job_id": "j", "reason": ["why"]}, "cuzk.cancel: reason: expected a string of at most 200"),
    ({"job_id": "j", "reason": "x" * 201}, "reason: expected a string of at most 200 characters, "
                                             "or none; got str of 201 characters"),
    ({"reason": "why"}, "cuzk.cancel: missing a required argument: 'job_id'"),
])
def test_a_bad_cancel_message_is_refused_naming_its_field(kwargs, needle):
    from cuzk_tasks.service import tasks

    signature = inspect.signature(tasks.cancel.run)
    problem = request_checks.message_problem(TASK_CANCEL, (), kwargs, 10, signature)
    assert problem is not None and needle in problem, problem
    assert request_checks.message_problem(TASK_CANCEL, ("j",), {"reason": "r"}, 10, signature) is None


def test_cancel_by_name_ends_a_live_job_once_and_answers_what_it_did(ctx):
    job = pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "3", "b": "11"}}])
    assert pipeline.cancel_job(ctx, job, "not needed") == \
        {"job_id": job, "state": "cancelled", "cancelled": True}
    assert ctx.store.get_job(job)["error"] == "not needed"
    again = pipeline.cancel_job(ctx, job)  # delivered again: changes nothing
    assert again == {"job_id": job, "state": "cancelled", "cancelled": False}
    assert ctx.store.get_job(job)["error"] == "not needed"
    unknown = pipeline.cancel_job(ctx, "no-such-job")
    assert unknown["state"] == "unknown" and unknown["cancelled"] is False
    assert "no such job" in unknown["error"]


# --- submit_job: every field named --------------------------------------------------------

@pytest.mark.parametrize("kwargs, needle", [
    ({"partitions": 5}, "partitions: expected a non-empty list of partitions, got int 5"),
    ({"priority": "high"}, "priority: expected an integer 0 (first) .. 9 (last), or none; got str 'high'"),
    ({"priority": 3.7}, "priority: expected an integer 0 (first) .. 9 (last), or none; got float 3.7"),
    ({"priority": False}, "priority: expected an integer"),
    ({"circuit": ["mulchain"]}, "circuit: expected a circuit name (a string of 1..200 characters), got list"),
    ({"request_id": "r" * (defaults.MAX_REQUEST_ID_CHARS + 1)}, "request_id: expected a string of 1..256"),
    ({"partitions": [{"input": {"a": nest(defaults.MAX_INPUT_DEPTH)}}]},
     "partition 0: input: nested more than 32 levels deep (MAX_INPUT_DEPTH)"),
    ({"partitions": [nest(500)]}, "partition 0: expected an object, got list"),
])
def test_submit_job_names_the_bad_field_and_creates_nothing(ctx, kwargs, needle):
    call = {"circuit": "mulchain", "partitions": [{"input": {"a": "1"}}], **kwargs}
    with pytest.raises(CuzkError) as info:
        pipeline.submit_job(ctx, **call)
    assert str(info.value) == needle or str(info.value).startswith(needle), str(info.value)
    assert _jobs(ctx) == []


def test_an_input_at_the_depth_limit_is_accepted(ctx):
    job = pipeline.submit_job(ctx, "mulchain", [{"input": {"a": nest(defaults.MAX_INPUT_DEPTH - 1)}}])
    assert ctx.store.get_job(job)["state"] == "pending"


def test_an_oversized_inline_input_names_its_partition_once(ctx):
    with pytest.raises(CuzkError) as info:
        pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "1"}}, {"input": {"a": "1" * 5000}}],
                            job_id="refused")
    error = str(info.value)
    assert error.startswith("partition 1: input is ") and error.count("partition 1") == 1, error
    assert ctx.store.get_job("refused") is None


def test_a_refused_submit_names_its_first_partitions_and_counts_the_rest(ctx):
    big = {"input": {"a": "1" * 5000}}
    with pytest.raises(CuzkError) as info:
        pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "1"}}] + [big] * 5)
    error = str(info.value)
    assert [f"partition {i}: input is " in error for i in range(1, 6)] == [True] * 3 + [False] * 2
    assert error.endswith("; and 2 more partition(s)"), error


@pytest.mark.parametrize("given, needle", [
    ({"a": "3", "c": "1"}, "partition 1: input: signal 'c' is not an input of circuit "
                           "'mulchain' (its inputs, with their number of values: a (1), b (1))"),
    ({"a": ["3", "4"], "b": "1"}, "partition 1: input: signal 'a' has 2 value(s), circuit "
                                  "'mulchain' expects 1"),
    ({"a": "3", "b": "x1"}, "partition 1: input: 'x1' is not an integer"),
    ({"a": "3"}, "partition 1: input: missing input signal(s) of circuit 'mulchain': b (1)"),
    ("[1, 2]", "partition 1: input: expected a JSON object of input signals, got list"),
    ("{not json", "partition 1: input: not JSON ("),
], ids=["unknown", "count", "value", "missing", "array", "json"])
def test_an_input_that_does_not_fit_the_circuits_input_map_is_refused(ctx, given, needle):
    """Where the process knows the circuit's input map (a CPU worker's, from its start-up
    check), a misfit is refused at submit: before, the job was accepted and failed."""
    ctx.input_maps = {"mulchain": {"a": 1, "b": 1}}
    good = {"input": {"a": "3", "b": "0x0b"}}
    with pytest.raises(CuzkError) as info:
        pipeline.submit_job(ctx, "mulchain", [good, {"input": given}], job_id="misfit")
    assert needle in str(info.value), str(info.value)
    assert ctx.store.get_job("misfit") is None
    job = pipeline.submit_job(ctx, "mulchain", [good, {"input": {"a": 1, "b": "7"}}])
    assert ctx.store.get_job(job)["state"] == "pending"


@pytest.mark.parametrize("deadline", [float("inf"), float("-inf"), float("nan"), 0, -5, True, "9"])
def test_a_deadline_that_is_not_finite_and_positive_is_refused(ctx, deadline):
    with pytest.raises(CuzkError, match=r"^deadline_s: expected a finite number of seconds > 0"):
        pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "1"}}], deadline_s=deadline)


# --- on_done.queue ------------------------------------------------------------------------

@pytest.mark.parametrize("queue", ["cuzk:workers", "cuzk:failures", "_kombu.binding.x", "unacked",
                                   "unacked_index", "celery-task-meta-1", "svc.done:3", "a b",
                                   "", "q" * 201, 5])
def test_on_done_queue_must_be_a_celery_queue_name_of_no_key_of_ours(ctx, queue):
    with pytest.raises(CuzkError, match=r"^on_done\.queue: "):
        pipeline.submit_job(ctx, "mulchain", ["x.json"], on_done={"task": "svc.done", "queue": queue})
    assert _jobs(ctx) == []


def test_on_done_queue_is_none_of_the_service_s_own_queues(ctx):
    for queue in (ctx.settings.cpu_queue, ctx.settings.device_queue(0)):
        with pytest.raises(CuzkError, match=r"^on_done\.queue: .* is a queue of this service"):
            pipeline.submit_job(ctx, "mulchain", ["x.json"], on_done={"task": "t", "queue": queue})
    job = pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "1"}}],
                              on_done={"task": "svc.done", "queue": "svc.callbacks-1"})
    assert ctx.store.get_job(job)["on_done"]


def test_a_callback_to_a_queue_no_one_reads_expires_and_the_sweeper_drops_it(ctx):
    import base64
    import time

    from cuzk_tasks.recovery.sweeper import Sweeper

    short = pipeline.Context(ctx.app, ctx.settings.replace(on_done_ttl_s=1), worker_id="rqhost:cpu:1")
    queue = f"{ctx.settings.prefix}-unread"
    job = pipeline.submit_job(short, "mulchain", [{"input": {"a": "1"}}],
                              on_done={"task": "svc.done", "queue": queue})
    assert short.store.cancel_job(job, "stop")
    envelope = json.loads(short.store.redis.lindex(queue, 0))
    assert envelope["headers"]["expires"].endswith("+00:00")
    assert json.loads(base64.b64decode(envelope["body"]))[1]["job_id"] == job
    time.sleep(2.1)
    Sweeper(short).run_once(leases=False)
    assert short.store.redis.llen(queue) == 0


# --- request ids --------------------------------------------------------------------------

def test_a_request_id_reused_for_other_content_is_an_error(ctx):
    parts = [{"input": {"a": "1"}}]
    job = pipeline.submit_job(ctx, "mulchain", parts, request_id="r-1")
    # the same request again (a retry, a redelivery): the same job
    assert pipeline.submit_job(ctx, "mulchain", [{"input": {"a": "1"}}], request_id="r-1") == job
    for other in ({"partitions": [{"input": {"a": "2"}}]}, {"priority": 1},
                  {"deadline_s": 60}, {"on_done": {"task": "t", "queue": "svc.q"}}):
        call = {"circuit": "mulchain", "partitions": parts, "request_id": "r-1", **other}
        with pytest.raises(CuzkError) as info:
            pipeline.submit_job(ctx, **call)
        assert str(info.value).startswith("request_id 'r-1' is already in use with other content")
        assert job not in str(info.value)  # never names the other job
    assert _jobs(ctx) == [job]


def test_a_job_created_before_digests_still_answers_its_request_id(ctx):
    job, created = ctx.store.create_job(None, "mulchain", "k", 5, "old-1", [{"input": "{}"}])
    assert created and not ctx.store.get_job(job).get("request_digest")
    assert pipeline.submit_job(ctx, "mulchain", [{"input": {"b": 2}}], request_id="old-1") == job


@pytest.mark.parametrize("n", [2, 8])  # one step, and a creation in steps (chunk 3)
def test_a_request_digest_mismatch_is_refused_in_one_step_and_in_steps(store_factory, n):
    from cuzk_tasks.errors import StateError

    store = store_factory(chunk=3)
    parts = [{"input": json.dumps({"a": i})} for i in range(n)]
    job, created = store.create_job("j1", "c", "k", 5, "r1", parts, request_digest="d1")
    assert created and store.get_job(job)["request_digest"] == "d1"
    assert store.create_job("j2", "c", "k", 5, "r1", parts, request_digest="d1") == ("j1", False)
    with pytest.raises(StateError, match="request_id 'r1' is already in use with other content"):
        store.create_job("j3", "c", "k", 5, "r1", parts, request_digest="d2")
    assert not store.redis.exists(store.keys.job("j2"), store.keys.job("j3"))


# --- SafeRequest, in-process --------------------------------------------------------------

class _Message:
    """A delivered message as the worker's Request sees it (kombu's, reduced)."""

    def __init__(self, task, kwargs):
        from kombu.serialization import dumps

        self.headers = {"id": str(uuid.uuid4()), "task": task, "shadow": None}
        self.content_type, self.content_encoding, self.body = dumps(
            ((), kwargs, {"callbacks": None, "errbacks": None, "chain": None}), serializer="json")
        self.payload = ((), kwargs, {"callbacks": None, "errbacks": None, "chain": None})
        self.delivery_info, self.properties = {"routing_key": "cpu"}, {}


class _Pool:
    def __init__(self, error=None):
        self.error, self.calls = error, 0

    def apply_async(self, *args, **kwargs):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return None


def _request(ctx, task_name, kwargs, pool):
    from celery.worker.request import create_request_cls

    from cuzk_tasks.service.safe_request import SafeRequest

    app = ctx.app
    task = app.tasks[task_name]
    rejected = []
    cls = create_request_cls(SafeRequest, task, pool, "rqhost", None, app=app)
    req = cls(_Message(task_name, kwargs), app=app, task=task,
              on_reject=lambda logger, errors, requeue: rejected.append(requeue))
    return req, rejected


@pytest.mark.parametrize("kwargs, pool_error, needle", [
    ({"circuit": "mulchain", "partitions": [{"input": {"a": nest(500)}}]}, None,
     "cuzk.submit: partition 0: input: nested more than 32 levels deep"),
    # passes the bounds, and the hand-off raises anyway (as billiard's pickling did)
    ({"circuit": "mulchain", "partitions": ["x.json"]}, RecursionError("while pickling"),
     "cuzk.submit: the worker could not hand it to a pool process (RecursionError: while pickling)"),
])
def test_safe_request_refuses_once_records_it_and_answers_the_caller(ctx, kwargs, pool_error, needle):
    from celery.exceptions import TaskRevokedError
    from celery.worker import state

    pool = _Pool(pool_error)
    req, rejected = _request(ctx, TASK_SUBMIT, kwargs, pool)
    state.task_reserved(req)
    with pytest.raises(TaskRevokedError):
        req.execute_using_pool(pool)
    assert rejected == [False]  # rejected once, not requeued
    assert req not in state.requests.values() and req not in state.reserved_requests
    entry, = ctx.store.rejected_requests()
    assert entry["task"] == TASK_SUBMIT and entry["task_id"] == req.id
    assert entry["reason"].startswith(needle), entry
    assert ctx.store.redis.hget(ctx.store.keys.counters(), f"requests_rejected:{TASK_SUBMIT}") == "1"
    meta = ctx.app.backend.get_task_meta(req.id)
    assert meta["status"] == "FAILURE" and needle in str(meta["result"]), meta
    assert pool.calls == (1 if pool_error else 0)


def test_safe_request_hands_a_good_message_to_the_pool(ctx):
    pool = _Pool()
    req, rejected = _request(ctx, TASK_SUBMIT, {"circuit": "mulchain", "partitions": ["x.json"]}, pool)
    req.execute_using_pool(pool)
    assert pool.calls == 1 and rejected == [] and ctx.store.rejected_requests() == []
    json.dumps(req.kwargs)
