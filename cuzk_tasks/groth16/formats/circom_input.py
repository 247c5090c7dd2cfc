"""circom input.json, read as snarkjs reads it (``JSON.parse`` + ``unstringifyBigInts`` +
circom_runtime's ``normalize(BigInt(x) % p)``), for every witness generator (the wasm one in
:mod:`.witness`, circom's C++ one in :mod:`.native_witness`).

:func:`load_input_json` reads the file (never quoting it in an error); :func:`js_int` is the
``parse_int`` that keeps large JSON numbers as JavaScript sees them; :func:`qualify` flattens
the object into ``{signal name: [values]}`` and :func:`js_bigint` turns one value into an int.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from typing import Dict

from cuzk_tasks.errors import FormatError, WitnessError
from .jsonerror import json_error

_JS_MAX_SAFE = (1 << 53) - 1


class JsNumber:
    """A JSON number as JavaScript sees it (an IEEE double)."""

    __slots__ = ("text", "value")

    def __init__(self, text: str):
        self.text = text
        self.value = float(text)


def js_int(text: str):
    """A JSON integer as snarkjs reads it (``json.loads(..., parse_int=js_int)``): exact up to
    2^53, beyond that the double JavaScript rounds it to."""
    n = int(text)
    if abs(n) <= _JS_MAX_SAFE:
        return n
    return JsNumber(text)  # JavaScript rounds this to a double


_BIGINT_STR = re.compile(
    r"0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|([+-]?[0-9]+)")


def js_bigint(v, where: str) -> int:
    """``BigInt(v)`` as JavaScript evaluates it; ValueError otherwise."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, JsNumber):
        x = v.value
        if not math.isfinite(x) or x != int(x):
            raise ValueError(f"{v.text} is not an integer")
        n = int(x)
        if str(n) != v.text.lstrip("+") and "." not in v.text and "e" not in v.text.lower():
            warnings.warn(f"{where}: JSON number {v.text} exceeds 2^53 and was rounded "
                          f"to {n} (as snarkjs does); quote it as a string",
                          stacklevel=4)
        return n
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ValueError(f"{v!r} is not an integer")
        return int(v)
    if isinstance(v, str):
        t = v.strip(" \t\n\r\v\f\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
        if t == "":
            return 0
        m = _BIGINT_STR.fullmatch(t)
        if not m:
            raise ValueError(f"{v!r} is not an integer")
        if m.group(1) is not None:
            return int(m.group(1), 16)
        if m.group(2) is not None:
            return int(m.group(2), 8)
        if m.group(3) is not None:
            return int(m.group(3), 2)
        return int(m.group(4), 10)
    if v is None:
        raise ValueError("null is not an integer")
    raise ValueError(f"{type(v).__name__} value is not an integer")


def flatten(v, out: list):
    """Append the values of ``v`` (nested lists flattened, depth first) to ``out``."""
    if isinstance(v, list):
        for x in v:
            flatten(x, out)
    else:
        out.append(v)
    return out


def qualify(prefix: str, v, out: Dict[str, list], path: str):
    """Flatten input.json into ``{signal name: [values]}``.

    Plain values and (nested) arrays of values map to one signal; objects
    (circom 2.2 bus inputs) become ``prefix.field`` and arrays of objects
    ``prefix[i]...`` as circom's own witness_calculator.js does.
    """
    if isinstance(v, dict):
        for k, x in v.items():
            qualify(k if prefix == "" else f"{prefix}.{k}", x, out, path)
    elif isinstance(v, list):
        flat = flatten(v, [])
        if flat and any(isinstance(x, dict) for x in flat):
            if not all(isinstance(x, dict) for x in flat):
                raise WitnessError(f"{path}: input signal '{prefix}': array mixes "
                                   f"objects and values")
            for i, x in enumerate(v):
                qualify(f"{prefix}[{i}]", x, out, path)
        else:
            out[prefix] = flat
    else:
        out[prefix] = [v]


def load_input_json(path, fileobj=None) -> dict:
    """The input object of the input.json at ``path``; FormatError (naming ``path``, never
    quoting the file) when it is not a JSON object.  ``fileobj``: the file already open
    (binary; ``path`` then only names it), read and closed here."""
    path = os.fspath(path)
    try:
        if fileobj is None:
            fileobj = open(path, "rb")
        with fileobj as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise FormatError(path, "file", "no such file") from None
    except UnicodeDecodeError as exc:  # its message would quote the bad byte
        raise FormatError(path, "json", f"not UTF-8 text (invalid byte at offset {exc.start})") \
            from None
    try:
        data = json.loads(text, parse_int=js_int)
    except json.JSONDecodeError as exc:
        raise FormatError(path, "json", f"invalid JSON: {json_error(exc)}") from None
    if not isinstance(data, dict):
        raise FormatError(path, "json",
                          f"expected an object mapping signal names to values, "
                          f"got {type(data).__name__}")
    return data
