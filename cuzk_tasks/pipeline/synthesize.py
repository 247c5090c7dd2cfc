"""synthesize (cpu queue): the witness from the circuit's witness generator (its wasm, or circom's
C++ generator: ``witness = "native:..."``) and the partition's input (or a .wtns ref) into the
spool dir; synth_end, which also routes the partition and queues its
prove on the chosen device."""

from __future__ import annotations

import errno
import json
import os
import time

from ..errors import CuzkError, FormatError, SpoolFullError, WitnessError
from ..paths import atomic_output
from ..settings import defaults
from ..state import PartitionRun
from .context import Context, fail, internal_error, log, ms_since, open_ref, spooled_witness
from .registry import circuit_file_error
from .routing import after_route



def _load_inputs(ctx, part, idx):
    # lazy: the groth16 package loads numpy, which a client (importing the pipeline for
    # submit_job) never needs
    from ..groth16.formats import circom_input

    text = part.get("input")
    if text:
        too_big = ctx.settings.inline_input_error(idx, text)
        if too_big:
            raise CuzkError(too_big)
        try:
            data = json.loads(text, parse_int=circom_input.js_int)
        except json.JSONDecodeError as exc:
            raise CuzkError(f"input.json is malformed: invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise CuzkError(f"input.json is malformed: expected an object "
                            f"mapping signal names to values, got {type(data).__name__}")
        return data, f"<job input #{idx}>"
    ref = part.get("input_ref")
    f = open_ref(ctx, "input_ref", ref)
    return circom_input.load_input_json(ref, fileobj=f), ref


def synthesize(ctx: Context, run: PartitionRun, inline_input: str | None = None):
    """Synthesize ``run``; its circuit and priority come in every synthesize message
    (:meth:`~cuzk_tasks.service.messages.StageMessages.synthesize`), so no job is read here.
    Its attempt: 0 from submit_job (its message leaves it out), more from a sweeper that
    found the stage lost (``recover_stage``) or a retry after a full spool disk
    (``synth_retry``).  synth_begin rejects a job that is not live and a message of another
    attempt (stale), and counts the delivery: past ``max_deliveries`` (a synthesize whose
    process keeps dying) the partition fails instead.  The witness runs under
    ``Settings.witness_limit_s`` (a runaway wasm or native generator fails "witness
    generation exceeded N s",
    the worker lives on).

    ``inline_input``: the partition's input as its message carried it (a small inline one,
    ``defaults.CARRIED_INPUT_BYTES``).  synth_begin is then sent unread and the witness
    computed meanwhile; nothing is written and no error recorded before its reply accepts
    the run, and when the input it read differs from the carried one (a message not of ours)
    the witness is computed again from the stored input."""
    store, settings = ctx.store, ctx.settings
    limits = {"max_deliveries": settings.max_deliveries, "time_limit_s": settings.time_limit_s}
    early, early_ms = None, 0.0
    if inline_input is not None:
        sent = store.send_synth_begin(run, **limits)
        t0 = time.perf_counter()
        early = _outcome(_witness, ctx, run, {"input": inline_input})
        early_ms = ms_since(t0)  # the compute alone, not the wait for the reply below
        begun = sent.reply()
        if begun and begun.inputs.get("input") != inline_input:
            early = None
    else:
        begun = store.synth_begin(run, **limits)
    if not begun:
        log.info("synthesize %s/%s: rejected (%s), skipping", run.job_id, run.idx, begun.reason)
        return None
    t0 = time.perf_counter()
    if early is None:
        early, early_ms = _outcome(_witness, ctx, run, begun.inputs), 0.0
    witness_ref, data, curve = early[0] or (None, None, None)
    try:
        if early[1] is not None:
            raise early[1]
        if data is not None:
            _write_spooled(ctx, witness_ref, data)
    except SpoolFullError as exc:  # an outage of this host, not the job's fault: retry later
        _hand_back(ctx, run, exc)
        return None
    except CuzkError as exc:
        fail(ctx, run, exc)
        return None
    except MemoryError:
        log.exception("synthesize %s/%s ran out of memory", run.job_id, run.idx)
        fail(ctx, run, f"out of memory in synthesize (circuit {run.circuit!r})")
        return None
    except Exception as exc:  # a bug or an I/O problem: fail the partition, keep the worker
        log.exception("synthesize %s/%s crashed", run.job_id, run.idx)
        fail(ctx, run, internal_error(exc))
        return None
    message = ctx.messages.prove(run, witness_ref)
    end = store.synth_end(run, witness_ref, early_ms + ms_since(t0), route_circuit=run.circuit,
                          message=message, curve=curve)
    if not end:
        log.info("synthesize %s/%s: synth_end rejected (%s)", run.job_id, run.idx, end.reason)
        if end.reason.startswith("job_") and \
                witness_ref == spooled_witness(ctx, run.job_id, run.idx):
            _unlink(witness_ref)  # the job ended meanwhile: no one will read it
        return None
    after_route(ctx, run, end.routed)
    return witness_ref


def _outcome(fn, *args):
    """``(fn(*args), None)``, or ``(None, the exception it raised)``: raised by the caller once
    it knows the run is its own to fail."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - raised again by the caller
        return None, exc


def _witness(ctx, run, part):
    """The witness of partition ``run`` from its inputs ``part`` (``input``, ``input_ref`` or
    ``witness_ref``): ``(witness_ref, the .wtns bytes to spool there or None, the curve's
    snarkjs name)``.  Writes nothing."""
    spec = ctx.registry.get(run.circuit)
    zkey = ctx.resident.get(spec.name)
    curve = zkey.curve.snarkjs_name
    if part.get("witness_ref"):
        # lazy: groth16 loads numpy (see _load_inputs)
        from ..groth16.formats.wtns import read_wtns

        f = open_ref(ctx, "witness_ref", part["witness_ref"])
        witness_ref = f.name  # the real path, which prove and finalize open again
        w = read_wtns(part["witness_ref"], zkey=zkey, fileobj=f)
        w.close()
        return witness_ref, None, curve
    generator = spec.witness_generator
    if not generator:
        raise CuzkError(f"circuit {spec.name!r} has no wasm (or witness) configured: "
                        "partitions must give a witness_ref")
    # lazy: groth16 loads numpy, the wasm path wasmtime (see _load_inputs)
    from ..groth16.native_witness import generator_path, get_generator
    from ..groth16.formats.wtns import check_witness_curve, wtns_bytes

    kind, path = ("witness", generator_path(generator)) if spec.witness else ("wasm", generator)
    inputs, where = _load_inputs(ctx, part, run.idx)
    try:
        calc = get_generator(generator)
    except (FormatError, WitnessError, OSError) as exc:  # a trap or time-out too
        raise circuit_file_error(spec.name, kind, path, exc) from None
    check_witness_curve(calc.prime, path, zkey)
    try:
        values = calc.calculate(inputs, where, time_limit_s=ctx.settings.witness_limit_s)
    except WitnessError as exc:  # name the circuit: the generator's path may not
        raise CuzkError(f"circuit {spec.name!r}: {exc}") from None
    except MemoryError:
        raise CuzkError(f"circuit {spec.name!r}: out of memory computing the witness "
                        f"of partition {run.idx} ({path})") from None
    if values.shape[0] != zkey.n_vars:
        raise CuzkError(f"witness has {values.shape[0]} values, the zkey "
                        f"of circuit {spec.name!r} expects nVars={zkey.n_vars}")
    return spooled_witness(ctx, run.job_id, run.idx), wtns_bytes(values, calc.prime), curve


#: the errors of a spool write that are this host's outage, not the job's fault: what the
#: partition's outage record says of each (never the server's path)
SPOOL_OUTAGES = {errno.ENOSPC: "spool disk full: no room for",
                 errno.EDQUOT: "spool disk quota exceeded: no room for",
                 errno.EROFS: "spool read-only (a read-only file system): cannot write",
                 errno.EACCES: "spool not writable (permission denied): cannot write"}


def _write_spooled(ctx, path, data: bytes, wait_s: float | None = None):
    """Write a witness into the spool dir.  A full, read-only or unwritable spool (ENOSPC,
    EDQUOT, EROFS, EACCES: :data:`SPOOL_OUTAGES`) is waited out for up to ``wait_s``
    (defaults.SPOOL_FULL_WAIT_S), the write retried after 1 s, 2 s, 4 s, ...; then
    :class:`SpoolFullError` ("spool disk full: no room for a witness of N bytes for S s"; the
    log line names the directory, the error does not)."""
    wait_s = defaults.SPOOL_FULL_WAIT_S if wait_s is None else wait_s
    waited, delay = 0.0, 1.0
    while True:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with atomic_output(path) as f:
                f.write(data)
            return
        except OSError as exc:
            if exc.errno not in SPOOL_OUTAGES:
                raise
            full = f"{SPOOL_OUTAGES[exc.errno]} a witness of {len(data)} bytes"
        if waited >= wait_s:
            raise SpoolFullError(f"{full} for {waited:.0f} s")
        delay = min(delay, wait_s - waited)
        log.warning("%s (%s); retrying in %.0f s", full, ctx.settings.spool_dir, delay)
        time.sleep(delay)
        waited += delay
        delay *= 2


def _hand_back(ctx, run, exc):
    """The partition goes back to the queue (synth_retry, attempt + 1) after a host outage."""
    # host-affine: it stays placed on its device, so its synthesize stays on this host
    queue = ctx.settings.host_cpu_queue() if ctx.settings.host_affine else None
    message = ctx.messages.synthesize(run.next_attempt(), queue=queue)
    if ctx.store.synth_retry(run, str(exc), message=message):
        log.warning("synthesize %s/%s: %s; partition queued again (attempt %d)", run.job_id,
                    run.idx, exc, run.attempt + 1)
    else:
        log.info("synthesize %s/%s: %s; partition moved meanwhile", run.job_id, run.idx, exc)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass  # the spool sweep (cuzk_tasks/recovery/spool.py) removes what is left
