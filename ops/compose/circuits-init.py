#!/usr/bin/env python3
"""circuits-init of the compose stack: seed the circuits volume from the image.

    cuzk-circuits-init [SRC [DEST]]      # default /opt/cuzk/circuits -> /srv/circuits

Copies every file of SRC (the sample circuit and ops/compose/cuzk.toml, see Dockerfile)
into DEST that DEST does not have yet; an existing file is never overwritten.  When DEST
already has its own cuzk.toml (an operator's, or a bind-mounted directory) that does not
register a circuit of SRC's cuzk.toml -- the sample ``demo-submit`` proves -- that
circuit's table is appended to it, so the demo and the workers agree.  Circuits the file
already names are left as they are.  Standard library only (runs in the image).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib

CONFIG = "cuzk.toml"


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


def add_missing_circuits(sample_path: str, config_path: str) -> list[str]:
    """Append to ``config_path`` the circuit tables of ``sample_path`` it does not register;
    returns their names.  A config that is not valid TOML is left alone (the services report
    it with the file and the line)."""
    with open(sample_path, encoding="utf-8") as f:
        sample = f.read()
    with open(config_path, encoding="utf-8") as f:
        current = f.read()
    try:
        have = tomllib.loads(current).get("circuits", {})
    except tomllib.TOMLDecodeError as exc:
        print(f"circuits-init: {config_path}: not valid TOML ({exc}); left unchanged",
              file=sys.stderr)
        return []
    missing = {n: t for n, t in circuit_tables(sample).items() if n not in have}
    if missing:
        with open(config_path, "a", encoding="utf-8") as f:
            f.write("" if current.endswith("\n") or not current else "\n")
            for name, table in missing.items():
                f.write(f"\n# added by circuits-init: the sample circuit (demo-submit)\n")
                f.write(table.rstrip("\n") + "\n")
    return list(missing)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    src = argv[0] if argv else "/opt/cuzk/circuits"
    dest = argv[1] if len(argv) > 1 else "/srv/circuits"
    copied = copy_missing(src, dest)
    added = []
    if CONFIG not in copied and os.path.exists(os.path.join(src, CONFIG)):
        added = add_missing_circuits(os.path.join(src, CONFIG), os.path.join(dest, CONFIG))
    print(f"circuits-init: {dest}: copied {len(copied)} new file(s)"
          + (f"; registered {', '.join(added)} in {CONFIG}" if added else ""))
    for entry in sorted(os.listdir(dest)):
        print(f"  {entry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
