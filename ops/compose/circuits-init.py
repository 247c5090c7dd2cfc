#!/usr/bin/env python3
"""circuits-init of the compose stack: seed the circuits volume from the image.

    cuzk-circuits-init [SRC [DEST]]      # default /opt/cuzk/circuits -> /srv/circuits

Copies every file of SRC (the sample circuit and ops/compose/cuzk.toml, see Dockerfile)
into DEST that DEST does not have yet; an existing file is never overwritten.  When DEST
already has its own cuzk.toml (an operator's, or a bind-mounted directory) that does not
register a circuit of SRC's cuzk.toml -- the sample ``demo-submit`` proves -- that
circuit's table is appended to it, and SRC's ``allowed_input_roots`` line is added when the
file has none, so the demo and the workers agree.  Circuits and roots the file already
names are left as they are.  Standard library only (runs in the image).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib

CONFIG = "cuzk.toml"
ROOTS_KEY = "allowed_input_roots"


def copy_missing(src: str, dest: str) -> list[str]:
    """Copy the files of ``src`` that ``dest`` lacks; returns their relative paths."""
    copied = []
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        rel_dir = os.path.relpath(folder, src)
        os.makedirs(os.path.join(dest, rel_dir), exist_ok=True)
        for name in sorted(files):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            target = os.path.join(dest, rel)
            if not os.path.lexists(target):
                shutil.copy2(os.path.join(folder, name), target)
                copied.append(rel)
    return copied


def circuit_tables(text: str) -> dict[str, str]:
    """{name: text of its ``[circuits.NAME]`` table} of a cuzk.toml written like ours."""
    out, name, lines = {}, None, []
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[\s*circuits\.([A-Za-z0-9_-]+)\s*\]", line)
        if header or re.match(r"\s*\[", line):
            if name:
                out[name] = "".join(lines)
            name, lines = (header.group(1), [line]) if header else (None, [])
        elif name:
            lines.append(line)
    if name:
        out[name] = "".join(lines)
    return out


def _top_level_line(text: str, key: str):
    """The single-line top-level ``key = value`` of ``text`` (before any table), or None."""
    for line in text.splitlines():
        if re.match(r"\s*\[", line):
            return None
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return line.strip()
    return None


def _insert_top_level(text: str, line: str) -> str:
    """``text`` with ``line`` placed before its first table (top-level keys go there)."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, l in enumerate(lines) if re.match(r"\s*\[", l)), len(lines))
    block = [f"# added by circuits-init: demo-submit's input lies under the sample's root\n",
             line + "\n", "\n"]
    return "".join(lines[:at] + block + lines[at:])


def _covers(roots, base: str, path: str) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        root = os.path.realpath(os.path.join(base, os.path.expanduser(root)))
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def add_missing_circuits(sample_path: str, config_path: str) -> list[str]:
    """Make the operator's ``config_path`` serve the sample of ``sample_path``: append the
    circuit tables it does not register, and the sample's ``allowed_input_roots`` line when
    it has none (an operator's own list is never widened: a warning says the demo's input
    lies outside it).  Returns what was added.  A config that is not valid TOML is left
    alone (the services report it with the file and the line)."""
    with open(sample_path, encoding="utf-8") as f:
        sample = f.read()
    with open(config_path, encoding="utf-8") as f:
        current = f.read()
    try:
        have = tomllib.loads(current)
    except tomllib.TOMLDecodeError as exc:
        print(f"circuits-init: {config_path}: not valid TOML ({exc}); left unchanged",
              file=sys.stderr)
        return []
    missing = {n: t for n, t in circuit_tables(sample).items()
               if n not in have.get("circuits", {})}
    text, added = current, []
    if missing:
        text += "" if text.endswith("\n") or not text else "\n"
        for name, table in missing.items():
            text += "\n# added by circuits-init: the sample circuit (demo-submit)\n"
            text += table.rstrip("\n") + "\n"
            added.append(f"[circuits.{name}]")
    roots_line = _top_level_line(sample, ROOTS_KEY)
    base = os.path.dirname(os.path.abspath(config_path))
    if roots_line and ROOTS_KEY not in have:
        text = _insert_top_level(text, roots_line)
        added.append(roots_line)
    elif roots_line and missing:
        sample_dirs = [os.path.join(base, n) for n in missing]
        if not all(_covers(have[ROOTS_KEY], base, d) for d in sample_dirs):
            print(f"circuits-init: {config_path}: {ROOTS_KEY} does not include "
                  f"{', '.join(sample_dirs)}: demo-submit's input will be refused",
                  file=sys.stderr)
    if text != current:
        tomllib.loads(text)  # never write a file the services cannot read
        with open(config_path, "w", encoding="utf-8") as f:
            f.write(text)
    return added


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    src = argv[0] if argv else "/opt/cuzk/circuits"
    dest = argv[1] if len(argv) > 1 else "/srv/circuits"
    copied = copy_missing(src, dest)
    added = []
    if CONFIG not in copied and os.path.exists(os.path.join(src, CONFIG)):
        added = add_missing_circuits(os.path.join(src, CONFIG), os.path.join(dest, CONFIG))
    print(f"circuits-init: {dest}: copied {len(copied)} new file(s)"
          + (f"; added to {CONFIG}: {'; '.join(added)}" if added else ""))
    for entry in sorted(os.listdir(dest)):
        print(f"  {entry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
