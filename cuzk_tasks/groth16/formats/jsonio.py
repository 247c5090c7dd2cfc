"""snarkjs JSON shapes: proof.json, public.json, verification_key.json.

Writing follows snarkjs exactly (``bfj.write(..., {space: 1})``, which is
byte-identical to ``JSON.stringify(x, null, 1)``: one-space indentation, no
trailing newline; Python's ``json.dumps(x, indent=1)`` produces the same bytes).

Points are affine standard-form Python-int tuples (``None`` = infinity), as in
:mod:`.reference.curve`.  In JSON they are projective triples of decimal
strings: G1 ``[x, y, "1"]``, G2 ``[[x0, x1], [y0, y1], ["1", "0"]]``; snarkjs
writes infinity as ``["0", "1", "0"]`` / ``[["0","0"], ["1","0"], ["0","0"]]``.

Curves: a verification key names its curve (``"curve"``: ``"bn128"``, ``"bls12381"``, or
another name snarkjs accepts for them, see :func:`.curves.curve_by_name`; BN254 when
absent); proofs and public signals are parsed for a given curve (BN254 by default) and a
proof's own ``"curve"`` must agree with it.

Errors: structural problems (wrong shape, non-decimal numbers, coordinates
>= q, z other than 1 / 0, an unknown or mismatched curve) raise :class:`FormatError`
naming the file and field; mathematically invalid values (point not on the curve, not in
the subgroup, public signal >= r) raise :class:`VerificationError` naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

from cuzk_tasks.errors import FormatError, VerificationError
from .. import points
from ..backends import native
from ..curves import BN254, Curve, curve_by_name, known_curves
from .jsonerror import json_error  # noqa: F401 (re-exported)
# writing is in .proof_json (no numpy: the CLI's whole-file prove writes with it)
from .proof_json import (dump_json, dumps_json, g1_to_json, g2_to_json,  # noqa: F401
                         proof_to_json, public_to_json)
from ..reference.curve import g1_of, g2_of
from ..reference.pairing import pairing_of

_DECIMAL = re.compile(r"[0-9]+\Z")


# ------------------------------------------------------------------ parsing --

def _num(value, path, field, modulus, what="coordinate"):
    """A decimal string (or a JSON integer) -> int < modulus."""
    if isinstance(value, bool):
        raise FormatError(path, field, f"expected a decimal string, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _DECIMAL.match(value):
        n = int(value)
    else:
        raise FormatError(path, field, f"expected a decimal string, got {_short(value)}")
    if n < 0 or n >= modulus:
        raise FormatError(path, field, f"{what} is not a field element (>= the modulus)")
    return n


def _short(value):
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def _list(value, n, path, field):
    if not isinstance(value, list) or len(value) != n:
        raise FormatError(path, field, f"expected a list of {n} elements, got {_short(value)}")
    return value


def g1_from_json(value, path=None, field="point", check=True, curve: Curve = BN254):
    """``[x, y, z]`` (or ``[x, y]``) -> affine point or None; z must be "1" (or "0" for
    infinity); with ``check``, on the curve and in the order-r subgroup."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise FormatError(path, field, f"expected [x, y, z] of decimal strings, got {_short(value)}")
    q = curve.q
    x = _num(value[0], path, f"{field}[0]", q)
    y = _num(value[1], path, f"{field}[1]", q)
    z = _num(value[2], path, f"{field}[2]", q) if len(value) == 3 else 1
    if z == 0:
        return None
    if z != 1:
        raise FormatError(path, field, "only affine points (z = \"1\") or infinity (z = \"0\") are accepted")
    p = (x, y)
    if check:
        if not g1_of(curve).is_on_curve(p):
            raise VerificationError(f"{_where(path)}{field}: point is not on the curve")
        if not _in_subgroup_cached(curve, 1, p):
            raise VerificationError(f"{_where(path)}{field}: point is not in the G1 subgroup")
    return p


def g2_from_json(value, path=None, field="point", check=True, curve: Curve = BN254):
    """``[[x0,x1],[y0,y1],[z0,z1]]`` -> affine point or None, on the twist and in G2."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise FormatError(path, field, f"expected [[x0, x1], [y0, y1], [z0, z1]], got {_short(value)}")
    q = curve.q
    coords = []
    for i, c in enumerate(value):
        _list(c, 2, path, f"{field}[{i}]")
        coords.append((_num(c[0], path, f"{field}[{i}][0]", q), _num(c[1], path, f"{field}[{i}][1]", q)))
    z = coords[2] if len(coords) == 3 else (1, 0)
    if z == (0, 0):
        return None
    if z != (1, 0):
        raise FormatError(path, field,
                          "only affine points (z = [\"1\", \"0\"]) or infinity (z = [\"0\", \"0\"]) are accepted")
    p = (coords[0], coords[1])
    if check:
        if not g2_of(curve).is_on_curve(p):
            raise VerificationError(f"{_where(path)}{field}: point is not on the curve")
        if not _in_subgroup_cached(curve, 2, p):
            raise VerificationError(f"{_where(path)}{field}: point is not in the G2 subgroup")
    return p


_SUBGROUP_CACHE: dict = {}


def _in_subgroup_cached(curve, group, p):
    """G1 (group 1) or G2 (group 2) membership of an on-curve point, remembered: a
    verification key's points are checked again on every verify."""
    key = (curve.name, group, p)
    ok = _SUBGROUP_CACHE.get(key)
    if ok is None:
        ok = pairing_of(curve).g1_in_subgroup(p) if group == 1 else _g2_in_subgroup(curve, p)
        if len(_SUBGROUP_CACHE) > 1024:
            _SUBGROUP_CACHE.clear()
        _SUBGROUP_CACHE[key] = ok
    return ok


def _g2_in_subgroup(curve, p):
    """The reference's test pi(Q) == [lambda]Q (``Pairing.g2_in_subgroup``), with [lambda]Q
    on the native core when it loads: a fresh proof's B is tested on every verify, about
    3 ms in Python, a few hundred microseconds natively."""
    pr = pairing_of(curve)
    if not native.available():
        return pr.g2_in_subgroup(p)
    lam = pr.g2_eigenvalue
    k = points.ints_to_limb_array([abs(lam)], native.FR_LIMBS)
    m = points.g2_affine_from_mont(
        native.g2_point_op(native.POINT_MUL, points.g2_rows_to_mont([p], curve), k, curve=curve),
        curve)
    if m is None:  # [lambda]Q = O but pi(Q) != O
        return False
    return (g2_of(curve).neg(m) if lam < 0 else m) == pr.g2_frobenius(p)


def _where(path):
    return f"{path}: " if path is not None else ""


def curve_from_json(name, path, field="curve") -> Curve:
    """The curve a JSON ``"curve"`` value names; FormatError naming the file and field."""
    curve = curve_by_name(name)
    if curve is None:
        raise FormatError(path, field, f"unsupported curve {_short(name)}, expected one of "
                                       f"{known_curves()}")
    return curve


def proof_from_json(obj, path=None, curve: Curve = BN254):
    """proof.json dict -> ``(pi_a, pi_b, pi_c)`` validated affine points of ``curve``
    (the verification key's); the proof's own ``"curve"`` must name the same one."""
    if not isinstance(obj, dict):
        raise FormatError(path, "proof", f"expected a JSON object, got {_short(obj)}")
    for key in ("pi_a", "pi_b", "pi_c"):
        if key not in obj:
            raise FormatError(path, key, "missing")
    protocol = obj.get("protocol", "groth16")
    if protocol != "groth16":
        raise FormatError(path, "protocol", f"expected \"groth16\", got {_short(protocol)}")
    if "curve" in obj:
        named = curve_from_json(obj["curve"], path)
        if named is not curve:
            raise FormatError(path, "curve", f"proof is for {named} but the verification key "
                                             f"is for {curve}")
    pi_a = g1_from_json(obj["pi_a"], path, "pi_a", curve=curve)
    pi_b = g2_from_json(obj["pi_b"], path, "pi_b", curve=curve)
    pi_c = g1_from_json(obj["pi_c"], path, "pi_c", curve=curve)
    return pi_a, pi_b, pi_c


def public_from_json(obj, path=None, curve: Curve = BN254):
    """public.json list -> list of ints, each < r (VerificationError naming the index otherwise)."""
    if not isinstance(obj, list):
        raise FormatError(path, "public signals", f"expected a JSON list, got {_short(obj)}")
    out = []
    for i, v in enumerate(obj):
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, str) and _DECIMAL.match(v))):
            raise FormatError(path, f"public signal [{i}]", f"expected a decimal string, got {_short(v)}")
        n = int(v)
        if n < 0 or n >= curve.r:
            raise VerificationError(
                f"{_where(path)}public signal [{i}]: value is not a field element (>= r)")
        out.append(n)
    return out


# ------------------------------------------------------- verification keys --

@dataclass
class VerificationKey:
    n_public: int
    alpha1: Optional[tuple]
    beta2: Optional[tuple]
    gamma2: Optional[tuple]
    delta2: Optional[tuple]
    ic: list
    alphabeta_12: Optional[tuple] = None  # flat Fq12 12-tuple, as in the JSON (not used to verify)
    curve: Curve = BN254


def vkey_to_json(n_public, alpha1, beta2, gamma2, delta2, alphabeta_12, ic,
                 curve: Curve = BN254) -> dict:
    """The dict ``snarkjs zkey export verificationkey`` writes (same key order).

    ``alphabeta_12`` is a flat Fq12 tuple (see :mod:`.reference.tower`).
    """
    gt_to_json = pairing_of(curve).gt_to_json
    return {
        "protocol": "groth16",
        "curve": curve.snarkjs_name,
        "nPublic": int(n_public),
        "vk_alpha_1": g1_to_json(alpha1),
        "vk_beta_2": g2_to_json(beta2),
        "vk_gamma_2": g2_to_json(gamma2),
        "vk_delta_2": g2_to_json(delta2),
        "vk_alphabeta_12": gt_to_json(alphabeta_12),
        "IC": [g1_to_json(p) for p in ic],
    }


def vkey_from_json(obj, path=None) -> VerificationKey:
    if not isinstance(obj, dict):
        raise FormatError(path, "verification key", f"expected a JSON object, got {_short(obj)}")
    for key in ("nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2", "IC"):
        if key not in obj:
            raise FormatError(path, key, "missing")
    if obj.get("protocol", "groth16") != "groth16":
        raise FormatError(path, "protocol", f"expected \"groth16\", got {_short(obj.get('protocol'))}")
    curve = curve_from_json(obj.get("curve", BN254.snarkjs_name), path)
    n_public = obj["nPublic"]
    if isinstance(n_public, str) and _DECIMAL.match(n_public):
        n_public = int(n_public)
    if isinstance(n_public, bool) or not isinstance(n_public, int) or n_public < 0:
        raise FormatError(path, "nPublic", f"expected a non-negative integer, got {_short(n_public)}")
    ic_json = obj["IC"]
    if not isinstance(ic_json, list) or len(ic_json) != n_public + 1:
        raise FormatError(path, "IC", f"expected a list of nPublic + 1 = {n_public + 1} points")
    alphabeta = None
    if "vk_alphabeta_12" in obj:
        ab = obj["vk_alphabeta_12"]
        _list(ab, 2, path, "vk_alphabeta_12")
        for h in range(2):
            _list(ab[h], 3, path, f"vk_alphabeta_12[{h}]")
            for i in range(3):
                _list(ab[h][i], 2, path, f"vk_alphabeta_12[{h}][{i}]")
                for j in range(2):
                    _num(ab[h][i][j], path, f"vk_alphabeta_12[{h}][{i}][{j}]", curve.q)
        alphabeta = pairing_of(curve).gt_from_json(ab)
    return VerificationKey(
        n_public=n_public,
        alpha1=g1_from_json(obj["vk_alpha_1"], path, "vk_alpha_1", curve=curve),
        beta2=g2_from_json(obj["vk_beta_2"], path, "vk_beta_2", curve=curve),
        gamma2=g2_from_json(obj["vk_gamma_2"], path, "vk_gamma_2", curve=curve),
        delta2=g2_from_json(obj["vk_delta_2"], path, "vk_delta_2", curve=curve),
        ic=[g1_from_json(p, path, f"IC[{i}]", curve=curve) for i, p in enumerate(ic_json)],
        alphabeta_12=alphabeta,
        curve=curve,
    )


def load_json(path, what="JSON"):
    """Read a JSON file; FormatError (naming the file) if it is not valid JSON.
    The message never quotes the file's contents."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise FormatError(path, what, f"not valid JSON ({json_error(exc)})") from None
    except UnicodeDecodeError as exc:
        raise FormatError(path, what, f"not UTF-8 text (invalid byte at offset {exc.start})") \
            from None
