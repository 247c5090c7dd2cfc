#!/usr/bin/env python3
"""One-shot GPU check for a lent GPU machine (issue 6): build, test, benchmark.

    python bench/gpu_check.py [--budget 330] [--quick] [--skip-tests]

Dry run without a GPU (what tests/test_gpu_emulated.py does, so the one lent-GPU call
is not spent on a bug in this script): ``PYTHONPATH=tests/cuda_emu/site python
bench/gpu_check.py --skip-build --max-log 11`` -- the kernels run under the CUDA
emulation, at sizes up to 2^11.

Meant for a machine WITHOUT network (Python with cupy preinstalled): it only
installs the repository itself (``pip install --no-build-isolation --no-deps
-e .`` to compile the native CPU core, falling back to ``setup.py build_ext
--inplace``).  Sections, each in a subprocess with its own timeout so a hang
or crash in one never loses the others:

  env     python / numpy / cupy / wasmtime / nvidia-smi
  build   the native CPU core (needed for the CPU comparison and the tests)
  tests   pytest -m gpu tests/test_gpu_backend.py (differential + fixture proofs)
  ntt     Fr NTT 2^16..2^22, GPU (device-resident data) vs CPU core
  msm     G1 MSM 2^16..2^22, GPU cold (host bases copied) / warm (device bases) vs CPU
  prove   prove_start of synthetic 2^16 and 2^20-constraint circuits, cold/warm vs CPU

It prints what it did even when something fails, a table with the speedups
and the H200 targets (warm: G1 MSM 2^20 <= 25 ms, NTT 2^20 <= 3 ms, prove 2^20
<= 0.5 s), and writes gpu_check.json to $OUT (or the current directory).
Witnesses come from the committed .wtns fixtures or are synthetic, so
wasmtime is not needed.  The whole run is kept under --budget seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS_MS = {("msm", 1 << 20): 25.0, ("ntt", 1 << 20): 3.0, ("prove", 1 << 20): 500.0}
SECTION_LIMITS = {"build": 120, "tests": 110, "ntt": 40, "msm": 90, "prove": 90}


def log(msg):
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# =========================================================================== child sections

def _sync():
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _time_gpu(fn, repeats=3):
    """(first, median of the rest) in ms, synchronising the device around each call."""
    times = []
    for _ in range(repeats + 1):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    rest = sorted(times[1:])
    return times[0], rest[len(rest) // 2]


def _time_cpu(fn):
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000.0, out


def _emit(result):
    print("RESULT " + json.dumps(result), flush=True)


def _random_scalars(rnd, n):
    import numpy as np

    s = np.frombuffer(rnd.randbytes(32 * n), dtype=np.uint64).reshape(n, 4).copy()
    s[:, 3] &= np.uint64((1 << 61) - 1)  # < 2^253 < r
    return s


def _random_mont(rnd, n):
    return _random_scalars(rnd, n)  # < r, any value is a valid Montgomery representative


def _random_bases(n, distinct=1024, seed=1):
    """n G1 points (read-only, zkey-like): `distinct` random k*G from the CPU core, tiled."""
    import numpy as np

    from cuzk_tasks.groth16.backends import native as N
    from cuzk_tasks.groth16 import points as P
    from cuzk_tasks.groth16.reference.curve import G1
    from cuzk_tasks.groth16.reference.field import FR

    rnd = random.Random(seed)
    gen = P.g1_affine_to_mont(G1.generator)
    d = min(distinct, n)
    table = np.zeros((d, 8), dtype=np.uint64)
    for i in range(d):
        table[i] = N.g1_point_op(N.POINT_MUL, gen, P.ints_to_limb_array([rnd.randrange(1, FR)]))
    out = np.tile(table, (n // d + 1, 1))[:n].copy()
    out.flags.writeable = False
    return out


def section_ntt(sizes):
    import cupy

    from cuzk_tasks.groth16.backends import native as N
    from cuzk_tasks.groth16.backends.gpu import GpuBackend

    gpu = GpuBackend()
    rnd = random.Random(2)
    for log_n in sizes:
        n = 1 << log_n
        x = _random_mont(rnd, n)
        d_x = cupy.asarray(x)
        try:
            cold, warm = _time_gpu(lambda: gpu.fr_ntt_device(d_x))
            ok = bool((cupy.asnumpy(gpu.fr_ntt_device(d_x)) == N.fr_ntt(x)).all())
            cpu_ms, _ = _time_cpu(lambda: N.fr_ntt(x))
            _emit({"op": "ntt", "n": n, "gpu_cold_ms": cold, "gpu_warm_ms": warm, "cpu_ms": cpu_ms,
                   "match_cpu": ok})
        except Exception as exc:
            _emit({"op": "ntt", "n": n, "error": repr(exc)})
        d_x = None
        gpu.release_scratch()


def section_msm(sizes):
    import numpy as np

    from cuzk_tasks.groth16.backends import native as N
    from cuzk_tasks.groth16.backends.gpu import GpuBackend

    gpu = GpuBackend()
    rnd = random.Random(3)
    bases_all = _random_bases(1 << max(sizes))
    for log_n in sizes:
        n = 1 << log_n
        bases = bases_all[:n]
        scalars = _random_scalars(rnd, n)
        try:
            gpu.evict()
            t0 = time.perf_counter()
            res_cold = gpu.g1_msm_jacobian(bases, scalars)  # host bases: copied for this call
            cold = (time.perf_counter() - t0) * 1000.0
            d_bases = gpu.to_device(bases)  # device-resident, as a DeviceZkey's sections are
            warm_times = []
            for _ in range(3):
                t0 = time.perf_counter()
                gpu.g1_msm_jacobian(d_bases, scalars)
                warm_times.append((time.perf_counter() - t0) * 1000.0)
            d_bases = None
            warm = sorted(warm_times)[1]
            cpu_ms, res_cpu = _time_cpu(lambda: N.g1_msm(np.asarray(bases), scalars))
            from cuzk_tasks.groth16 import points as P

            ok = P.g1_jacobian_to_affine(res_cold) == P.g1_jacobian_to_affine(res_cpu)
            _emit({"op": "msm", "n": n, "gpu_cold_ms": cold, "gpu_warm_ms": warm, "cpu_ms": cpu_ms,
                   "match_cpu": ok, "window": gpu.window_bits(n)})
        except Exception as exc:
            _emit({"op": "msm", "n": n, "error": repr(exc)})
    gpu.evict()


class SyntheticZkey:
    """zkey-shaped inputs for prove_start: random coefficients, bases and witness."""

    def __init__(self, log_n, seed=5):
        import numpy as np

        from cuzk_tasks.groth16 import points as P
        from cuzk_tasks.groth16.reference.curve import G1
        from cuzk_tasks.groth16.formats.zkey import COEF_DTYPE

        from cuzk_tasks.groth16.curves import BN254

        rnd = random.Random(seed)
        n = 1 << log_n
        self.curve = BN254  # the synthetic bases are BN254 points
        self.path = f"synthetic-2^{log_n}"
        self.domain_size = n
        self.log_domain_size = log_n
        self.n_vars = n
        self.n_public = 1
        terms = 3 * n  # A: 2 terms per constraint, B: 1 term
        rec = np.zeros(terms, dtype=COEF_DTYPE)
        idx = np.arange(n, dtype=np.uint32)
        rec["matrix"][:2 * n] = 0
        rec["constraint"][:n] = idx
        rec["signal"][:n] = idx
        rec["constraint"][n:2 * n] = idx
        rec["signal"][n:2 * n] = (idx * np.uint32(7) + np.uint32(1)) % np.uint32(n)
        rec["matrix"][2 * n:] = 1
        rec["constraint"][2 * n:] = idx
        rec["signal"][2 * n:] = (idx * np.uint32(13) + np.uint32(3)) % np.uint32(n)
        rec["value"] = _random_scalars(rnd, terms)
        rec.flags.writeable = False
        self.coefs = rec
        self.n_coefs = terms
        pts = _random_bases(n, seed=seed)
        self.a_points = self.b1_points = pts
        self.c_points = pts[: n - self.n_public - 1]
        self.h_points = pts
        self.delta1 = G1.generator
        w = _random_scalars(rnd, n)
        w[0] = (1, 0, 0, 0)
        self.witness = w
        _ = P  # noqa


def section_prove(sizes):
    from cuzk_tasks.groth16.backends.select import CpuBackend
    from cuzk_tasks.groth16.backends.gpu import GpuBackend
    from cuzk_tasks.groth16.prover import prove_start

    gpu = GpuBackend()
    cpu = CpuBackend()
    for log_n in sizes:
        n = 1 << log_n
        try:
            zk = SyntheticZkey(log_n)
            gpu.evict()
            t0 = time.perf_counter()
            p_cold = prove_start(zk, zk.witness, backend=gpu)
            gpu.trim_scratch()
            cold = (time.perf_counter() - t0) * 1000.0
            warm_times, p_warm = [], None
            for _ in range(2):
                t0 = time.perf_counter()
                p_warm = prove_start(zk, zk.witness, backend=gpu)
                gpu.trim_scratch()
                warm_times.append((time.perf_counter() - t0) * 1000.0)
            warm = min(warm_times)
            cpu_ms, p_cpu = _time_cpu(lambda: prove_start(zk, zk.witness, backend=cpu))
            ok = (p_warm.a, p_warm.b1, p_warm.c, p_warm.h) == (p_cpu.a, p_cpu.b1, p_cpu.c, p_cpu.h)
            _emit({"op": "prove", "n": n, "gpu_cold_ms": cold, "gpu_warm_ms": warm, "cpu_ms": cpu_ms,
                   "match_cpu": ok, "gpu_steps_ms": p_warm.timings_ms, "cpu_steps_ms": p_cpu.timings_ms,
                   "cold_match": (p_cold.a, p_cold.h) == (p_cpu.a, p_cpu.h)})
        except Exception as exc:
            _emit({"op": "prove", "n": n, "error": repr(exc), "trace": traceback.format_exc()[-2000:]})
    gpu.evict()


def child_main(section, sizes):
    sys.path.insert(0, ROOT)
    {"ntt": section_ntt, "msm": section_msm, "prove": section_prove}[section](sizes)


# =========================================================================== parent

class Runner:
    def __init__(self, budget):
        self.deadline = time.monotonic() + budget
        self.report = {"sections": {}, "results": []}

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, name, cmd, limit, env=None):
        timeout = min(limit, self.left() - 5)
        if timeout < 5:
            log(f"{name}: SKIPPED (time budget spent)")
            self.report["sections"][name] = {"status": "skipped: no time left"}
            return None
        log(f"{name}: {' '.join(cmd)} (timeout {timeout:.0f}s)")
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                                  env=env or os.environ.copy())
            status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
            out = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            status = f"TIMEOUT after {timeout:.0f}s"
            out = ((exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes)
                   else (exc.stdout or "")) + ((exc.stderr or b"").decode(errors="replace")
                                               if isinstance(exc.stderr, bytes) else (exc.stderr or ""))
        except OSError as exc:
            status, out = f"could not start: {exc}", ""
        secs = time.monotonic() - t0
        self.report["sections"][name] = {"status": status, "seconds": round(secs, 1)}
        for line in out.splitlines():
            if line.startswith("RESULT "):
                try:
                    self.report["results"].append(json.loads(line[7:]))
                except ValueError:
                    pass
        tail = "\n".join(l for l in out.splitlines() if not l.startswith("RESULT "))[-3000:]
        log(f"{name}: {status} in {secs:.1f}s")
        if tail.strip():
            print("    " + tail.replace("\n", "\n    "), flush=True)
        return status


def env_report():
    info = {"python": sys.version.split()[0], "platform": platform.platform()}
    for mod in ("numpy", "cupy", "wasmtime", "pytest"):
        try:
            m = __import__(mod)
            info[mod] = getattr(m, "__version__", "present")
        except Exception as exc:
            info[mod] = f"MISSING ({exc.__class__.__name__})"
    if shutil.which("nvidia-smi"):
        try:
            info["nvidia-smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as exc:
            info["nvidia-smi"] = repr(exc)
    for k, v in info.items():
        log(f"env: {k}: {v}")
    if str(info.get("numpy", "")).startswith("MISSING"):
        log("numpy is missing: nothing but the environment report can run (pip has no network here)")
    if str(info.get("wasmtime", "")).startswith("MISSING"):
        log("wasmtime is missing: fine, witnesses come from committed .wtns fixtures / synthetic data")
    return info


def fmt(v, unit=""):
    return "-" if v is None else (f"{v:.2f}{unit}" if isinstance(v, float) else f"{v}{unit}")


def print_table(results):
    print("\n" + "=" * 100)
    print(f"{'op':6} {'size':>8} {'GPU cold ms':>12} {'GPU warm ms':>12} {'CPU ms':>10} "
          f"{'speedup':>8} {'= CPU':>6} {'target ms':>10} {'meets':>6}")
    print("-" * 100)
    for r in results:
        n = r.get("n", 0)
        size = f"2^{n.bit_length() - 1}" if n else "?"
        if "error" in r:
            print(f"{r['op']:6} {size:>8}  ERROR {r['error'][:70]}")
            continue
        warm, cpu = r.get("gpu_warm_ms"), r.get("cpu_ms")
        speed = f"{cpu / warm:.1f}x" if warm and cpu else "-"
        target = TARGETS_MS.get((r["op"], n))
        meets = "-" if target is None or warm is None else ("yes" if warm <= target else "NO")
        print(f"{r['op']:6} {size:>8} {fmt(r.get('gpu_cold_ms')):>12} {fmt(warm):>12} {fmt(cpu):>10} "
              f"{speed:>8} {str(r.get('match_cpu', '-')):>6} {fmt(target):>10} {meets:>6}")
    print("=" * 100, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=330.0, help="total seconds (default 330)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (2^16..2^20)")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--max-log", type=int, help="largest size 2^N for every section (a dry run "
                    "under the CUDA emulation; the targets then do not apply)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child, [int(s) for s in args.sizes.split(",")])
        return 0

    runner = Runner(args.budget)
    runner.report["env"] = env_report()
    py = sys.executable
    env = os.environ.copy()
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("CUZK_THREADS", str(os.cpu_count() or 1))

    if not args.skip_build:
        st = runner.run("build", [py, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                                  "--no-index", "-e", "."], SECTION_LIMITS["build"], env)
        if st != "ok":
            log("pip install -e . failed; trying python setup.py build_ext --inplace")
            runner.run("build_ext", [py, "setup.py", "build_ext", "--inplace"], SECTION_LIMITS["build"], env)
    probe = subprocess.run([py, "-c", "from cuzk_tasks.groth16.backends import native, gpu;"
                            "print(native.available(), gpu.device_count())"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    log(f"native core available, CUDA devices: {probe.stdout.strip() or probe.stderr.strip()[-500:]}")

    if not args.skip_tests:
        runner.run("tests", [py, "-m", "pytest", "-m", "gpu", "-x", "-q", "-p", "no:cacheprovider",
                             "-o", "addopts=", "tests/test_gpu_backend.py", "-rs"],
                   SECTION_LIMITS["tests"], env)
    top = 20 if args.quick else 22
    sizes = [s for s in (16, 18, 20, 22) if s <= top]
    plan = [("ntt", list(range(16, top + 1))), ("msm", sizes), ("prove", [16, 20])]
    if args.max_log:
        plan = [(name, sorted({min(s, args.max_log) for s in sz})) for name, sz in plan]
    for section, sz in plan:
        runner.run(section, [py, os.path.abspath(__file__), "--child", section,
                             "--sizes", ",".join(map(str, sz))], SECTION_LIMITS[section], env)
        print_table(runner.report["results"])

    out_dir = os.environ.get("OUT") or "."
    try:
        with open(os.path.join(out_dir, "gpu_check.json"), "w") as f:
            json.dump(runner.report, f, indent=2, default=str)
        log(f"wrote {os.path.join(out_dir, 'gpu_check.json')}")
    except OSError as exc:
        log(f"could not write gpu_check.json: {exc}")
    log("sections: " + ", ".join(f"{k}={v['status']}" for k, v in runner.report["sections"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
