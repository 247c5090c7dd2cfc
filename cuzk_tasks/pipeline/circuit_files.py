"""A configured circuit's files checked against each other, as a worker starts: its zkey
reads, and its witness generator is over the zkey's scalar field and computes as many wires
as the zkey has (``nVars``).  A mismatched pair -- a wasm rebuilt from another version of
the circuit, a zkey of another curve -- would otherwise fail every job of the circuit, one
by one.  (The stages check the same things per partition: synthesize the witness's size
and curve, the prover the zkey's sections.)"""

from __future__ import annotations

from ..errors import ConfigError, FormatError, WitnessError
from ..settings.config import CircuitSpec


def _reason(exc) -> str:
    if isinstance(exc, FormatError):
        return f"{exc.field}: {exc.problem}"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


def check_circuit(spec: CircuitSpec, witness: bool = True) -> dict | None:
    """ConfigError naming circuit ``spec.name`` and the file at fault unless its zkey reads
    (header and section table) and -- with ``witness``, for a worker that synthesizes -- its
    witness generator loads, is over the zkey's scalar field and (a wasm, whose size is known
    without running it) computes ``nVars`` wires.  Returns the circuit's input map
    (``{signal: number of values}``, what submit checks inline inputs against) when the
    generator names its inputs, else None."""
    # lazy: groth16 loads numpy; the wasm calculator wasmtime (a client never needs either)
    from ..groth16.formats.wtns import check_witness_curve
    from ..groth16.formats.zkey import read_zkey_header
    from ..groth16.native_witness import generator_path, get_generator

    try:
        zkey = read_zkey_header(spec.zkey)
    except (FormatError, OSError) as exc:
        raise ConfigError(f"circuit {spec.name!r}: zkey {spec.zkey}: {_reason(exc)}") from None
    generator = spec.witness_generator
    if not witness or not generator:
        return None
    kind = "witness generator" if spec.witness else "wasm"
    path = generator_path(generator)
    try:
        calc = get_generator(generator)
        check_witness_curve(calc.prime, path, zkey)
    except (FormatError, WitnessError, OSError) as exc:
        raise ConfigError(f"circuit {spec.name!r}: {kind} {path}: {_reason(exc)}") from None
    wires = getattr(calc, "witness_size", None)  # a native generator's: known once it ran
    if wires is not None and wires != zkey.n_vars:
        raise ConfigError(
            f"circuit {spec.name!r}: {kind} {path} computes {wires} wires but zkey "
            f"{spec.zkey} has nVars={zkey.n_vars}: the two are not of the same circuit "
            "(rebuild both from one .circom)")
    try:
        return calc.input_map()
    except (FormatError, WitnessError, OSError):  # the stages report what this one meets
        return None
