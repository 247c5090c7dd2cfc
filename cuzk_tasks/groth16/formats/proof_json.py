"""Writing snarkjs's proof.json and public.json (the shapes are in :mod:`.jsonio`, which
also parses them).  This module imports no numpy: ``cuzk-tasks prove`` on the CPU core
writes its output with it and nothing heavier (:mod:`.native_prove`)."""

#: characters a JSON string holds as they are (json.dumps escapes the others)
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}


def dump_json(obj, path):
    """Write ``obj`` exactly as snarkjs writes its JSON files."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(dumps_json(obj))


def dumps_json(obj) -> str:
    """``json.dumps(obj, indent=1, ensure_ascii=False)``, snarkjs's layout.  Proofs, public
    inputs and verification keys (dicts, lists, decimal strings) are written here without
    importing json, which costs a small proof's command line ~4 ms; anything else goes to
    json (tests/test_native_prove.py checks that both write the same)."""
    out = []
    if _write(obj, 0, out):
        return "".join(out)
    # lazy: only for what _write does not know (escapes, numbers, nesting of other types)
    import json

    return json.dumps(obj, indent=1, ensure_ascii=False)


def _write(obj, depth, out) -> bool:
    """Append ``obj``'s indented JSON to ``out``; False for a value it leaves to json."""
    if isinstance(obj, str):
        if not _PLAIN.issuperset(obj):
            return False
        out.append(f'"{obj}"')
        return True
    if isinstance(obj, int) and not isinstance(obj, bool):
        out.append(str(obj))
        return True
    if isinstance(obj, (list, tuple)):
        items = [(None, value) for value in obj]
        opening, closing = "[", "]"
    elif isinstance(obj, dict):
        if not all(isinstance(key, str) for key in obj):
            return False
        items = list(obj.items())
        opening, closing = "{", "}"
    else:
        return False
    if not items:
        out.append(opening + closing)
        return True
    inner = "\n" + " " * (depth + 1)
    out.append(opening)
    for index, (key, value) in enumerate(items):
        out.append(inner if index == 0 else "," + inner)
        if key is not None:
            if not _write(key, depth + 1, out):
                return False
            out.append(": ")
        if not _write(value, depth + 1, out):
            return False
    out.append("\n" + " " * depth + closing)
    return True


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
