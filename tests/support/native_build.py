"""Build circom's C++ witness generators (``circom --c``) of the fixture circuits for the tests.

``circom2`` (tools/node) writes the C++ sources; g++ and nasm build them as circom's Makefile
does, with two savings: everything at -O0 (a test needs the outputs, not the speed: poseidon's
4.8 MB of generated C++ takes ~20 s at -O0, ~50 s at -O1), and the circuit-independent objects
(main, calcwit, fr, fr_asm: the same for every circuit over one prime) compiled once, keyed by
the hash of their sources.  Compilations run in parallel, one per core.

Needs g++, nasm, libgmp-dev and nlohmann-json3-dev (Debian packages), node and tools/node.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import pathlib
import shutil
import subprocess

from support.snarkjs_tool import FIXTURES_DIR, NODE_MODULES, ROOT

CIRCUITS_DIR = FIXTURES_DIR / "circuits"
COMMON = ("main.cpp", "calcwit.cpp", "fr.cpp")
HEADERS = ("circom.hpp", "calcwit.hpp", "fr.hpp")
CXXFLAGS = ("-std=c++11", "-O0")
_INCLUDE_DIRS = ("/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/local/include")


def missing_tools() -> list[str]:
    """What a native build lacks here (empty: all there): the reason a test is skipped."""
    missing = [tool for tool in ("g++", "nasm", "node") if shutil.which(tool) is None]

    def header(name):
        return any(os.path.exists(os.path.join(d, name)) for d in _INCLUDE_DIRS)

    if not header("gmp.h"):
        missing.append("libgmp-dev")
    if not header("nlohmann/json.hpp"):
        missing.append("nlohmann-json3-dev")
    if not (NODE_MODULES / "circom2" / "cli.js").exists():
        missing.append("tools/node (npm ci --prefix tools/node)")
    return missing


def circom_cpp(name: str, out: pathlib.Path, prime: str = "bn128") -> pathlib.Path:
    """``circom --c --sym`` of tests/fixtures/circuits/<name>.circom into ``out``: returns the
    ``<name>_cpp`` directory.  circom2 is WASI: it sees paths relative to its cwd only."""
    out.mkdir(parents=True, exist_ok=True)

    def rel(p):
        return os.path.relpath(p, ROOT)

    proc = subprocess.run(
        ["node", str(NODE_MODULES / "circom2" / "cli.js"), rel(CIRCUITS_DIR / f"{name}.circom"),
         "--c", "--sym", "--prime", prime, "-l", rel(CIRCUITS_DIR), "-l", rel(NODE_MODULES),
         "-o", rel(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    cpp = out / f"{name}_cpp"
    if proc.returncode != 0 or not (cpp / f"{name}.cpp").exists():
        raise RuntimeError(f"circom --c {name} failed ({proc.returncode}):\n{proc.stdout}\n"
                           f"{proc.stderr}")
    return cpp


def _run(argv, cwd):
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")


def _common_key(cpp: pathlib.Path) -> str:
    h = hashlib.sha256(" ".join(CXXFLAGS).encode())
    for f in (*COMMON, *HEADERS, "fr.asm"):
        h.update(f.encode() + b"\0" + (cpp / f).read_bytes())
    return h.hexdigest()[:16]


def build(circuits: dict, base: pathlib.Path) -> dict:
    """circom's C++ witness generators of fixture circuits, built under ``base``:
    ``circuits`` maps a key to (circuit name, circom prime), e.g. ``{"bls12381/mulchain":
    ("mulchain", "bls12381")}``; returns ``{key: binary path}`` (``<binary>.dat`` next to it,
    ``<name>.sym`` one directory up, as circom writes them)."""
    base.mkdir(parents=True, exist_ok=True)
    jobs = os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        names = {key: name for key, (name, _) in circuits.items()}
        cpps = dict(zip(circuits, pool.map(
            lambda key: circom_cpp(circuits[key][0], base / key.replace("/", "_"),
                                   circuits[key][1]), circuits)))
        # the circuit-independent objects, once per distinct source set (one per prime)
        common = {}
        for cpp in cpps.values():
            common.setdefault(_common_key(cpp), cpp)
        # longest first (the biggest generated sources), so no core idles at the end
        argvs = []
        for key, cpp in common.items():
            d = base / f"common-{key}"
            d.mkdir(exist_ok=True)
            for f in (*COMMON, *HEADERS, "fr.asm"):
                shutil.copy(cpp / f, d / f)
            argvs += [(d / f, ["g++", "-c", *CXXFLAGS, "-I.", f]) for f in COMMON]
            argvs.append((d / "fr.asm", ["nasm", "-felf64", "fr.asm", "-o", "fr_asm.o"]))
        argvs += [(cpp / f"{names[k]}.cpp", ["g++", "-c", *CXXFLAGS, "-I.", f"{names[k]}.cpp"])
                  for k, cpp in cpps.items()]
        argvs.sort(key=lambda item: -item[0].stat().st_size)
        builds = [pool.submit(_run, argv, src.parent) for src, argv in argvs]
        for b in builds:
            b.result()
    out = {}
    for key, cpp in cpps.items():
        n = names[key]
        objs = [str(base / f"common-{_common_key(cpp)}" / "main.o"), *server_objects(cpp / n)[1:]]
        _run(["g++", "-o", n, f"{n}.o", *objs, "-lgmp", "-Wl,-z,noexecstack"], cpp)
        out[key] = cpp / n
    return out


def server_objects(binary: pathlib.Path) -> list:
    """The objects a witness server of the generator :func:`build` made at ``binary`` links
    (``build_server``'s ``objects``): its circuit's, then the shared ones but main.o."""
    cpp = binary.parent
    common = cpp.parent.parent / f"common-{_common_key(cpp)}"
    return [cpp / f"{binary.name}.o", *(common / o for o in ("calcwit.o", "fr.o", "fr_asm.o"))]
