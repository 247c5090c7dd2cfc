"""synthesize (cpu queue): the witness from the circuit's wasm and the partition's input (or
a .wtns ref) into the spool dir; synth_end, which also routes the partition and queues its
prove_start on the chosen device."""

from __future__ import annotations

import json
import os
import time

from ..errors import CuzkError
from ..errors import FormatError
from ..paths import atomic_output
from ..registry import circuit_file_error
from ..routing import after_route
from ..state import JobState
from .context import Context, fail, internal_error, log, ms_since, open_ref, spooled_witness



def _load_inputs(ctx, part, idx):
    # lazy: the witness calculator loads numpy and wasmtime, which a client (importing the
    # pipeline for submit_job) never needs
    from ..groth16 import witness as witness_mod

    text = part.get("input")
    if text:
        too_big = ctx.settings.inline_input_error(idx, text)
        if too_big:
            raise CuzkError(too_big)
        try:
            data = json.loads(text, parse_int=witness_mod.js_int)
        except json.JSONDecodeError as exc:
            raise CuzkError(f"input.json is malformed: invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CuzkError(f"input.json is malformed: expected an object "
                            f"mapping signal names to values, got {type(data).__name__}")
        return data, f"<job input #{idx}>"
    ref = part.get("input_ref")
    f = open_ref(ctx, "input_ref", ref)
    return witness_mod.load_input_json(ref, fileobj=f), ref


def synthesize(ctx: Context, job_id, idx, circuit=None, priority=None, attempt=0):
    """``circuit``/``priority`` come in messages sent by submit_job; without them (an older
    sender) they are read from the job.  ``attempt``: 0 from submit_job, more from a sweeper
    that found the stage lost (``recover_stage``).  synth_begin rejects a job that is not
    live and a message of another attempt (stale)."""
    store = ctx.store
    if circuit is None or priority is None:
        job = store.get_job(job_id)
        if job is None:
            log.warning("synthesize %s/%s: no such job", job_id, idx)
            return None
        if job["state"] not in (JobState.PENDING.value, JobState.RUNNING.value):
            log.info("synthesize %s/%s: job is %s, skipping", job_id, idx, job["state"])
            return None
        circuit = job["circuit"]
        priority = job.get("priority")
    priority = ctx.settings.default_priority if priority is None else int(priority)
    begun = store.synth_begin(job_id, idx, attempt)
    if not begun:
        log.info("synthesize %s/%s: rejected (%s), skipping", job_id, idx, begun.reason)
        return None
    t0 = time.perf_counter()
    try:
        spec = ctx.registry.get(circuit)
        part = begun.inputs
        zkey = ctx.resident.get(spec.name)
        if part.get("witness_ref"):
            # lazy: groth16 loads numpy (see _load_inputs)
            from ..groth16.wtns import read_wtns

            f = open_ref(ctx, "witness_ref", part["witness_ref"])
            witness_ref = f.name  # the real path, which prove_start and finalize open again
            w = read_wtns(part["witness_ref"], zkey=zkey, fileobj=f)
            w.close()
        else:
            if not spec.wasm:
                raise CuzkError(f"circuit {spec.name!r} has no wasm configured: partitions must "
                                "give a witness_ref")
            # lazy: groth16 loads numpy and wasmtime (see _load_inputs)
            from ..groth16.witness import get_calculator
            from ..groth16.wtns import check_witness_curve, wtns_bytes

            inputs, where = _load_inputs(ctx, part, idx)
            try:
                calc = get_calculator(spec.wasm)
            except (FormatError, OSError) as exc:
                raise circuit_file_error(spec.name, "wasm", spec.wasm, exc) from None
            check_witness_curve(calc.prime, spec.wasm, zkey)
            values = calc.calculate(inputs, where)
            if values.shape[0] != zkey.n_vars:
                raise CuzkError(f"witness has {values.shape[0]} values, the zkey "
                                f"of circuit {spec.name!r} expects nVars={zkey.n_vars}")
            witness_ref = spooled_witness(ctx, job_id, idx)
            os.makedirs(os.path.dirname(witness_ref), exist_ok=True)
            with atomic_output(witness_ref) as f:
                f.write(wtns_bytes(values, calc.prime))
    except CuzkError as exc:
        fail(ctx, job_id, idx, attempt, exc)
        return None
    except Exception as exc:  # a bug or an I/O problem: fail the partition, keep the worker
        log.exception("synthesize %s/%s crashed", job_id, idx)
        fail(ctx, job_id, idx, attempt, internal_error(exc))
        return None
    message = ctx.messages.prove_start(job_id, idx, attempt, circuit, witness_ref, priority)
    end = store.synth_end(job_id, idx, attempt, witness_ref, ms_since(t0), route_circuit=circuit,
                          message=ctx.outbox(message), curve=zkey.curve.snarkjs_name)
    if not end:
        log.info("synthesize %s/%s: synth_end rejected (%s)", job_id, idx, end.reason)
        return None
    after_route(ctx, job_id, idx, attempt, end.routed, message)
    return witness_ref
