"""By-name reads (``cuzk.status``, ``cuzk.result``)."""

from __future__ import annotations

from .context import Context


def job_status(ctx: Context, job_id, offset=0, limit=None) -> dict:
    """The public status document (``StateStore.job_status``: only the documented job and
    partition fields, ``reads.PUBLIC_JOB_FIELDS`` / ``PUBLIC_PARTITION_FIELDS`` -- no inputs,
    proofs, tokens, digests or server paths; ``offset``, ``limit``: a page of
    ``JOB_STATUS_PAGE`` by default, plus ``page`` and ``counts`` by state) with ``job_id``;
    for an unknown job ``{"job_id", "state": "unknown", "error"}``."""
    status = ctx.store.job_status(job_id, offset=offset, limit=limit)
    if status is None:
        return {"job_id": job_id, "state": "unknown", "error": f"no such job {job_id!r}"}
    return {"job_id": job_id, **status}


def job_result(ctx: Context, job_id) -> dict:
    """Always ``{"job_id", "state", ...}``: done -> the stored result (``job_id``,
    ``circuit``, ``kind``, ``state``, ``proofs`` as the on_done callback carries them; no
    other field: ``store_result`` in _lib.lua builds it so); failed/cancelled -> ``error``;
    pending/running -> ``n_done``, ``n_partitions`` (no ``proofs`` yet); unknown -> ``error``."""
    job = ctx.store.get_job(job_id)
    if job is None:
        return {"job_id": job_id, "state": "unknown", "error": f"no such job {job_id!r}"}
    state = job.get("state")
    if state == "done":
        # past the result TTL the partitions still hold the proofs
        return ctx.store.get_result(job_id) or ctx.store.collect_result(job_id)
    if state in ("failed", "cancelled"):
        return {"job_id": job_id, "state": state, "error": job.get("error") or ""}
    return {"job_id": job_id, "state": state, "n_done": job.get("n_done") or 0,
            "n_partitions": job.get("n_partitions")}
