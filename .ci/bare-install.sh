#!/usr/bin/env bash
# A bare install runs the service.
#
# `pip install .` with NO extras, into a fresh venv, pinned by ops/constraints.txt exactly as
# the container image installs it; `pip check` must be clean.  Then, from a directory outside
# the clone (so the installed package is what runs, never the source tree), the installed
# `cuzk-tasks` proves the bundled sample circuit through real processes: Debian's
# redis-server, a CPU worker, a CPU-backend device worker, `cuzk-tasks submit --wait`, and
# `cuzk-tasks verify` of the proof.  Exits non-zero on any failure, with the logs printed.
#
#   bash .ci/bare-install.sh        (needs python3 >= 3.11, g++, redis-server)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d -t cuzk-bare-XXXXXX)
pids=()
cleanup() {
    local rc=$?
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    sleep 1
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    if [ "$rc" != 0 ]; then
        for log in "$work"/*.log; do [ -e "$log" ] && { echo "--- $log"; tail -n 40 "$log"; }; done
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT

echo "bare install: python3 -m venv + PIP_CONSTRAINT=ops/constraints.txt pip install . (no extras)"
python3 -m venv "$work/venv"
PIP_CONSTRAINT="$repo/ops/constraints.txt" "$work/venv/bin/python" -m pip install -q "$repo"
"$work/venv/bin/python" -m pip check
bin="$work/venv/bin"

cd "$work"
port=$("$bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sample=$("$bin/python" -c 'import cuzk_tasks, pathlib; print(pathlib.Path(cuzk_tasks.__file__).parent / "data" / "mulchain_1k")')
case "$sample" in "$repo"/*) echo "bare install: cuzk_tasks was imported from the clone ($sample)" >&2; exit 1;; esac
mkdir -p spool/inputs results
cp "$sample/input.json" spool/inputs/input.json   # the spool dir is always an allowed input root
cat > cuzk.toml <<EOF
redis_url = "redis://127.0.0.1:$port/0"
spool_dir = "$work/spool"
results_dir = "$work/results"

[circuits.mulchain_1k]
kind = "mulchain-1k"
zkey = "$sample/circuit.zkey"
wasm = "$sample/circuit.wasm"
EOF
export CUZK_CONFIG="$work/cuzk.toml"

start() {  # start NAME CMD...: its own process group, output in NAME.log
    local name=$1; shift
    setsid "$@" > "$work/$name.log" 2>&1 &
    pids+=("$!")
}
start redis redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
start worker-cpu "$bin/cuzk-tasks" worker --cpu --concurrency 1
start worker-dev0 "$bin/cuzk-tasks" worker --device 0 --backend cpu

"$bin/cuzk-tasks" submit mulchain_1k spool/inputs/input.json --wait --timeout 180 -o result.json
"$bin/python" - <<'EOF'
import json
result = json.load(open("result.json"))
item, = result["proofs"]
json.dump(item["proof"], open("proof.json", "w"))
json.dump(item["public"], open("public.json", "w"))
EOF
"$bin/cuzk-tasks" verify "$sample/verification_key.json" public.json proof.json
echo "bare install: a job proved through real workers and its proof verifies"
