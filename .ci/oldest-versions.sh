#!/usr/bin/env bash
# The oldest Celery stack pyproject.toml allows runs the pipeline.
#
# A second venv holds the package's dependencies (and its test extra) at the oldest versions
# of the range, ops/ci/oldest-constraints.txt (celery and kombu 5.3.0 ...); the main venv
# (README Install block) holds the newest.  On it run the pipeline's end-to-end tests: real
# redis-server and workers, submit -> synthesize -> prove -> finalize, a by-name
# `cuzk.submit` from a plain Celery app, on_done callbacks to a second Celery app, the client.
# The checkout goes on the venv's path through a .pth file, as an editable install's finder
# would put it, so the native core the main install compiled in place (cuzk_tasks/_native*.so)
# is used as it is instead of being compiled a second time (minutes); like the editable
# install's files, its name starts with cuzk_tasks (test_on_done_e2e's side app leaves it out).
# Exits non-zero when a test fails.
#
#   bash .ci/oldest-versions.sh     (after pip install -e . of this clone; needs redis-server)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if ! compgen -G "cuzk_tasks/_native*.so" >/dev/null; then
    echo "oldest versions: no compiled native core in cuzk_tasks/ (cuzk_tasks/_native*.so);" \
         "run pip install -e . first" >&2
    exit 1
fi
work=$(mktemp -d -t cuzk-oldest-XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
requirements=$("$py" -c 'import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["test"]))')
mapfile -t requirements <<< "$requirements"
"$py" -m pip install -q -c ops/ci/oldest-constraints.txt "${requirements[@]}"
"$py" -m pip check
echo "oldest versions: venv installed in $SECONDS s"
echo "$repo" > "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cuzk_tasks_checkout.pth"

# The versions it runs with, each checked against its pin (a pin pip did not apply fails here).
"$py" - <<'EOF'
import re
from importlib.metadata import version

import cuzk_tasks

pins = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
            for line in open("ops/ci/oldest-constraints.txt")
            if line.strip() and not line.startswith("#"))
found = {name: version(name) for name in pins}
print("oldest versions:", ", ".join(f"{name} {v}" for name, v in found.items()),
      "| cuzk_tasks from", cuzk_tasks.__file__)
wrong = {name: v for name, v in found.items() if v != pins[name]}
if wrong:
    raise SystemExit(f"oldest versions: installed {wrong}, pinned {pins}")
EOF

"$py" -m pytest -q tests/test_pipeline_e2e.py tests/test_on_done_e2e.py tests/test_client.py
