"""Cancel a job by name (``cuzk.cancel``): idempotent, and it says what it did."""

from __future__ import annotations

from .context import Context

CANCEL_REASON = "cancelled by user"
"""The job's error when a cancel gives no reason."""


def cancel_job(ctx: Context, job_id, reason=None) -> dict:
    """End job ``job_id`` as cancelled (``StateStore.cancel_job``: its queued and in-flight
    stages become no-ops, its on_done callback is sent).  Returns ``{"job_id", "state",
    "cancelled"}``: ``cancelled`` true when this call ended the job, false when it had
    already ended -- ``state`` says how (done, failed, cancelled) -- so a cancel sent again
    changes nothing and answers the job's state again.  For an unknown job ``state`` is
    "unknown", with ``error``, as ``cuzk.status`` answers."""
    cancelled = ctx.store.cancel_job(job_id, reason or CANCEL_REASON)
    state = ctx.store.job_states([job_id])[job_id]
    if state is None:
        return {"job_id": job_id, "state": "unknown", "cancelled": False,
                "error": f"no such job {job_id!r}"}
    return {"job_id": job_id, "state": state, "cancelled": cancelled}
