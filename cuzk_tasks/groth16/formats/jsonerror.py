"""The message of a JSON syntax error without the document's text, importing nothing heavy:
the witness command line parses its input.json with it and never loads :mod:`.jsonio`
(numpy and the curve code, ~0.3 s of its start).  :mod:`.jsonio` re-exports it."""

from __future__ import annotations

import json
import re


def json_error(exc: json.JSONDecodeError) -> str:
    """What is wrong and where, without the document's characters that the pure-Python
    decoder quotes at the end of its message (``Invalid \\escape: 'x'``)."""
    what = re.sub(r":? ('[^']*'|\"[^\"]*\")( at)?$", "", exc.msg).removesuffix(" at")
    return f"{what} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
