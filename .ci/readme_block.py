"""Print the first fenced code block of a README.md section, as written.

    python3 .ci/readme_block.py "Install"     # the block under "## Install"

.ci/run runs the Install, "Run it" and Test blocks this way, so what a new user copies from
the README is exactly what CI runs.  Exits 2 when the section or its block is missing.
"""
import pathlib
import re
import sys


def block(text, heading):
    section = re.search(rf"^## {re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if section is None:
        raise LookupError(f"README.md has no '## {heading}' section")
    fenced = re.search(r"^```[a-z]*\n(.*?)^```", section.group(1), re.M | re.S)
    if fenced is None:
        raise LookupError(f"README.md section '## {heading}' has no fenced code block")
    return fenced.group(1)


if __name__ == "__main__":
    readme = pathlib.Path(__file__).resolve().parent.parent / "README.md"
    try:
        sys.stdout.write(block(readme.read_text(encoding="utf-8"), sys.argv[1]))
    except LookupError as exc:
        sys.exit(f"readme_block: {exc}")
