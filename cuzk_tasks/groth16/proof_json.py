"""Writing snarkjs's proof.json and public.json (the shapes are in :mod:`.jsonio`, which
also parses them).  This module imports no numpy: ``cuzk-tasks prove`` on the CPU core
writes its output with it and nothing heavier (:mod:`.native_prove`)."""

from __future__ import annotations

import json



def dump_json(obj, path):
    """Write ``obj`` exactly as snarkjs writes its JSON files."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(dumps_json(obj))


def dumps_json(obj) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False)


def g1_to_json(p):
    if p is None:
        return ["0", "1", "0"]
    return [str(p[0]), str(p[1]), "1"]


def g2_to_json(p):
    if p is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = p
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def proof_to_json(pi_a, pi_b, pi_c, curve="bn128") -> dict:
    """proof.json of three affine points; ``curve``: a :class:`.curves.Curve` or its snarkjs
    name (this module does not import :mod:`.curves`, to stay light)."""
    return {
        "pi_a": g1_to_json(pi_a),
        "pi_b": g2_to_json(pi_b),
        "pi_c": g1_to_json(pi_c),
        "protocol": "groth16",
        "curve": getattr(curve, "snarkjs_name", curve),
    }


def public_to_json(values) -> list:
    return [str(int(v)) for v in values]
