"""circom's C++ witness generator (``circom --c``) run as a subprocess, and the choice between
it and the wasm one.

A *witness generator spec* names a circuit's generator: ``native:<path>`` is circom's C++
generator built with its Makefile (the binary at ``<path>``, its ``<path>.dat`` next to it, as
the binary itself expects), anything else a circom ``.wasm`` (:mod:`.witness`).
:func:`get_generator` returns a cached generator object for a spec; both kinds have the same
contract: ``calculate(inputs, input_path, time_limit_s)`` -> an ``(nWitness, 4)`` uint64 array,
standard form, ``calculate_wtns`` -> the ``.wtns`` bytes, ``prime``, ``interrupt()``.

:class:`NativeWitnessGenerator` never lets the binary see the caller's input file: the inputs
are checked here first against the input map of the ``.dat`` file (names, sizes, integers: the
same messages as the wasm path), then written, reduced mod p as decimal strings, into a private
temporary directory, so whatever the binary prints can hold no byte of the caller's file.  It
runs in its own process group under a time limit (past it the group is killed:
:class:`~cuzk_tasks.errors.WitnessTimeoutError`), dies with its parent (``PR_SET_PDEATHSIG``:
the binary itself, not processes it would fork -- circom's fork none),
and a crash, an assert or a missing/short output is a :class:`~cuzk_tasks.errors.WitnessError`
naming the binary and what happened -- never a traceback, and the calling process lives on.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import mmap
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import types
from typing import Dict, List, Optional

from ..errors import FormatError, WitnessError, WitnessInterrupted, WitnessTimeoutError
from ..paths import atomic_output
from ..settings import defaults
from .curves import CURVES
from .formats.circom_input import js_bigint, load_input_json, qualify
from .formats.wtnsfile import wtns_file_bytes, wtns_header
from .native_server import WitnessServer, kill_group, server_path, usable_server
from .stamped_cache import StampedCache

log = logging.getLogger(__name__)

#: bytes per witness value: circom's generator writes Fr_N64 = 4 limbs on both supported curves
N8 = 32

#: the prefix of a spec that names circom's C++ witness generator (``native:/srv/p/porep``)
NATIVE_PREFIX = "native:"

#: slots of the input hash map at the start of a circom ``.dat`` file (circom's
#: ``SIZE_INPUT_HASHMAP``, 256 in every circom 2 release; each slot a packed
#: ``{u64 hash, u64 signalid, u64 signalsize}``, linear probing from ``hash % 256``)
INPUT_HASHMAP_SLOTS = 256
_SLOT = struct.Struct("<QQQ")

#: at most this many characters of the binary's own diagnostic line are quoted in an error
QUOTE_CHARS = 300

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1

# Lines of the binary's output that are quoted in an error: circom's own diagnostics, which
# name templates and source lines, never signal values (a circuit's log() output, which may
# hold input data, matches neither).
_ASSERT_LINE = re.compile(r"Failed assert in template/function [\w.$]+ line \d+\.")
_LIBC_ASSERT = re.compile(r"Assertion `[^`\n]*' failed\.")
_NOT_ALL_SET = re.compile(r"Not all inputs have been set\. Only \d+ out of \d+")


def is_native(spec) -> bool:
    """Whether the witness generator spec ``spec`` names circom's C++ generator."""
    return isinstance(spec, str) and spec.startswith(NATIVE_PREFIX)


def native_binary(spec: str) -> str:
    """The binary's path in a ``native:<path>`` spec."""
    return spec[len(NATIVE_PREFIX):]


def fnv1a64_utf8(name: str) -> int:
    """64-bit FNV-1a over the UTF-8 bytes of ``name``: the hash circom's C++ runtime gives an
    input signal's name (the wasm runtime hashes UTF-16 code units: the same for ASCII)."""
    h = _FNV_OFFSET
    for b in name.encode("utf-8"):
        h = ((h ^ b) * _FNV_PRIME) & _MASK64
    return h


def read_input_map(dat_path) -> Dict[int, int]:
    """``{name hash: number of values}`` of the main component's input signals, from the input
    hash map at the start of a circom ``.dat`` file; FormatError naming the file otherwise."""
    dat_path = os.fspath(dat_path)
    size = INPUT_HASHMAP_SLOTS * _SLOT.size
    try:
        with open(dat_path, "rb") as f:
            head = f.read(size)
    except FileNotFoundError:
        raise FormatError(dat_path, "file", "no such file (circom --c writes it next to the "
                          "binary, named <binary>.dat)") from None
    if len(head) < size:
        raise FormatError(dat_path, "input map", f"file is {len(head)} bytes, shorter than the "
                          f"{size}-byte input hash map of a circom .dat file")
    out: Dict[int, int] = {}
    for slot in range(INPUT_HASHMAP_SLOTS):
        h, signal_id, n = _SLOT.unpack_from(head, slot * _SLOT.size)
        if h == 0 and signal_id == 0 and n == 0:
            continue
        # circom places a name at hash % 256, or the next free slot after it
        if n > 1 << 32 or h in out or not _probe_reaches(head, h, slot):
            raise FormatError(dat_path, "input map", f"slot {slot} is not a circom input hash "
                              "map entry (not a .dat file of circom 2's C++ generator?)")
        out[h] = n
    return out


def _probe_reaches(head: bytes, h: int, slot: int) -> bool:
    pos = h % INPUT_HASHMAP_SLOTS
    while pos != slot:  # every slot before it on the probe path is taken
        if _SLOT.unpack_from(head, pos * _SLOT.size) == (0, 0, 0):
            return False
        pos = (pos + 1) % INPUT_HASHMAP_SLOTS
    return True


def find_prime(binary_path) -> int:
    """The scalar field the binary computes over: the supported curve whose r (32 bytes, little
    endian: circom's ``Fr_rawq``) its bytes hold; FormatError when none or several do."""
    binary_path = os.fspath(binary_path)
    with open(binary_path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            data = b""
        try:
            found = [c for c in CURVES if data.find(c.r.to_bytes(32, "little")) >= 0]
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
    if len(found) != 1:
        names = ", ".join(c.snarkjs_name for c in CURVES)
        raise FormatError(binary_path, "prime",
                          "holds no scalar field of a supported curve (" + names + ")"
                          if not found else "holds the scalar fields of several curves: not "
                          "one circom C++ witness generator")
    return found[0].r


def _find_sym(binary_path: str) -> Optional[str]:
    """The circuit's .sym (``circom --sym``) for the binary at OUT/name_cpp/name, if any."""
    d = os.path.dirname(os.path.abspath(binary_path))
    stem = os.path.basename(binary_path)
    cands = [os.path.join(d, stem + ".sym"), os.path.join(d, "circuit.sym")]
    if d.endswith("_cpp"):
        parent = os.path.dirname(d)
        cands += [os.path.join(parent, stem + ".sym"),
                  os.path.join(parent, os.path.basename(d)[:-4] + ".sym")]
    return next((c for c in cands if os.path.isfile(c)), None)


def _sym_names(sym_path: str) -> List[str]:
    """Names a .sym file gives the main component's signals and their bus fields
    (``main.x[3]`` -> ``x``, ``main.b.f`` -> ``b.f``), in file order; [] when unreadable."""
    names: Dict[str, None] = {}
    try:
        with open(sym_path, "r", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(",", 3)
                if len(parts) == 4 and parts[3].startswith("main."):
                    names.setdefault(re.sub(r"\[\d+\]", "", parts[3][5:]), None)
    except OSError:
        return []
    return list(names)


def _set_pdeathsig():  # pragma: no cover (runs in the child between fork and exec)
    """The child dies with the thread that started it: a pool process killed by its worker (the
    hard time limit) must not leave a witness generator running for ever."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover (not Linux)
    _PRCTL = None


class NativeWitnessGenerator:
    """circom's C++ witness generator at ``binary_path`` (``<binary_path>.dat`` next to it);
    ``calculate`` may be called often, from several threads.  See the module docstring."""

    def __init__(self, binary_path):
        self.binary_path = os.path.abspath(os.fspath(binary_path))
        self.dat_path = self.binary_path + ".dat"
        if not os.path.isfile(self.binary_path):
            raise FormatError(self.binary_path, "file", "no such file")
        if not os.access(self.binary_path, os.X_OK):
            raise FormatError(self.binary_path, "file", "not executable")
        self.inputs = read_input_map(self.dat_path)
        #: input values the circuit takes (all signals together)
        self.input_size = sum(self.inputs.values())
        self.prime = find_prime(self.binary_path)
        self.sym_path = _find_sym(self.binary_path)
        #: the kept-running server (:mod:`.native_server`) used instead of the binary, if any
        self.server_path = usable_server(self.binary_path, self.dat_path)
        if self.server_path is None and os.path.exists(server_path(self.binary_path)):
            log.warning("%s is older than %s or its .dat (or not executable): not used; "
                        "rebuild it with cuzk-tasks native-server", server_path(self.binary_path),
                        self.binary_path)
        self._lock = threading.Lock()
        self._running: Dict[int, subprocess.Popen] = {}
        self._interrupted: set = set()
        self._idle: List[WitnessServer] = []  # at most one: each holds the circuit's memory

    def __repr__(self):
        return f"NativeWitnessGenerator({self.binary_path!r})"

    # -- inputs ----------------------------------------------------------------
    def input_map(self) -> Optional[Dict[str, int]]:
        """``{signal name: number of values}`` of the circuit's inputs; None when the .sym
        file does not name them all."""
        names = self._names()
        if len(names) != len(self.inputs):
            return None
        return {names[h]: n for h, n in self.inputs.items()}

    def _names(self) -> Dict[int, str]:
        """``{hash: name}`` of the inputs the .sym file names (else {})."""
        if not self.sym_path:
            return {}
        out = {}
        for name in _sym_names(self.sym_path):
            h = fnv1a64_utf8(name)
            if h in self.inputs:
                out.setdefault(h, name)
        return out

    def _normalized(self, inputs: dict, input_path: str) -> Dict[str, List[str]]:
        """``{signal name: [decimal strings < p]}``, checked against the input map: a
        WitnessError naming ``input_path`` and the signal otherwise (the wasm path's words)."""
        qualified: Dict[str, list] = {}
        qualify("", inputs, qualified, input_path)
        out: Dict[str, List[str]] = {}
        for name, flat in qualified.items():
            size = self.inputs.get(fnv1a64_utf8(name))
            if size is None:
                if not flat:  # as the wasm: an empty array of no signal sets nothing
                    continue
                known = sorted(self._names().values())
                hint = f" (circuit inputs: {', '.join(known)})" if known else ""
                raise WitnessError(f"{input_path}: signal '{name}' is not an input of circuit "
                                   f"{self.binary_path}{hint}")
            if len(flat) != size:
                raise WitnessError(f"{input_path}: input signal '{name}' has {len(flat)} "
                                   f"value(s), the circuit expects {size}")
            values = []
            for i, v in enumerate(flat):
                try:
                    n = js_bigint(v, f"{input_path}: '{name}'")
                except ValueError as exc:
                    raise WitnessError(f"{input_path}: input signal '{name}'[{i}]: "
                                       f"{exc}") from None
                values.append(str(n % self.prime))
            out[name] = values
        given = {fnv1a64_utf8(name) for name in out}
        missing = [h for h, n in self.inputs.items() if n and h not in given]
        if missing:
            counter = sum(len(v) for v in out.values())
            names = self._names()
            if all(h in names for h in missing):
                what = ", ".join(f"'{names[h]}' ({self.inputs[h]} value"
                                 f"{'s' if self.inputs[h] != 1 else ''})" for h in missing)
                raise WitnessError(f"{input_path}: missing input signal(s) {what}: only "
                                   f"{counter} of the circuit's {self.input_size} input values "
                                   "are set")
            raise WitnessError(f"{input_path}: missing input signal(s): only {counter} of the "
                               f"circuit's {self.input_size} input values are set (no .sym file "
                               f"next to {self.binary_path} to name the missing signals; given: "
                               f"{', '.join(out) or 'none'})")
        return out

    # -- running ---------------------------------------------------------------
    def interrupt(self) -> int:
        """Stop every calculation running on this generator (any thread; safe from a signal
        handler): its process group is killed and it raises :class:`WitnessInterrupted`.
        Returns how many ran."""
        running = list(self._running.items())  # no lock: a signal handler may call this
        for key, proc in running:
            self._interrupted.add(key)
            kill_group(proc)
        return len(running)

    @contextlib.contextmanager
    def _watched(self, proc: subprocess.Popen):
        """While the body runs, :meth:`interrupt` may kill ``proc``'s group; the object
        yielded says afterwards whether it did (``.interrupted``)."""
        key, watch = id(proc), types.SimpleNamespace(interrupted=False)
        with self._lock:
            self._running[key] = proc
        try:
            yield watch
        finally:
            with self._lock:
                self._running.pop(key, None)
                watch.interrupted = key in self._interrupted
                self._interrupted.discard(key)

    def _fail(self, where: str, what: str) -> WitnessError:
        return WitnessError(f"{where}: witness generation failed in {self.binary_path}: {what}")

    def _interrupted_error(self, where: str) -> WitnessInterrupted:
        return WitnessInterrupted(f"{where}: witness generation in {self.binary_path} "
                                  "interrupted")

    def _timeout_error(self, where: str, limit: float) -> WitnessTimeoutError:
        return WitnessTimeoutError(f"{where}: witness generation exceeded {limit:g} s in "
                                   f"{self.binary_path} (witness_time_limit_s)")

    def calculate(self, inputs: dict, input_path: str = "<input>",
                  time_limit_s: Optional[float] = None) -> np.ndarray:
        """Witness as an (nWitness, 4) uint64 array, standard form.

        ``time_limit_s`` (default ``defaults.witness_time_limit_s()``) bounds the binary's run:
        past it its process group is killed and :class:`WitnessTimeoutError` ("witness
        generation exceeded N s") raised.  Bad input is a :class:`WitnessError` naming
        ``input_path`` and the signal, before the binary runs; a crash, an assert or a missing
        or short output one naming the binary."""
        # lazy: importing this module (the command line's wasm path) loads no numpy
        import numpy as np

        packed = self.calculate_packed(inputs, input_path, time_limit_s)
        return np.frombuffer(packed, dtype="<u8").reshape(-1, 4)  # a bytearray: writable

    def calculate_packed(self, inputs: dict, input_path: str = "<input>",
                         time_limit_s: Optional[float] = None) -> bytearray:
        """The witness as :meth:`calculate`'s, packed: 32 little-endian bytes per value (section
        2 of a ``.wtns``), without numpy."""
        if not isinstance(inputs, dict):
            raise FormatError(input_path, "json", "expected an object mapping "
                              "signal names to values")
        where = str(input_path)
        limit = defaults.witness_time_limit_s() if time_limit_s is None else float(time_limit_s)
        normalized = self._normalized(inputs, where)
        work = tempfile.mkdtemp(prefix="cuzk-witness-")  # 0700: this process's alone
        try:
            in_path = os.path.join(work, "input.json")
            out_path = os.path.join(work, "witness.wtns")
            with open(in_path, "w", encoding="ascii") as f:
                json.dump(normalized, f)
            if self.server_path is not None:
                return self._calculate_on_server(work, limit, where)
            status = self._run(work, in_path, out_path, limit, where)
            if status != 0:
                raise self._fail(where, self._what_happened(work, status))
            if not os.path.exists(out_path):
                raise self._fail(where, "it exited 0 but wrote no witness")
            return self._values_of_wtns(out_path, where)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _values_of_wtns(self, path: str, where: str) -> bytearray:
        """The values of the .wtns the binary wrote, which must be laid out as circom's
        ``writeBinWitness`` lays it out: 32-byte values over this circuit's prime."""
        size = os.path.getsize(path)
        count = max(0, (size - len(wtns_header(N8, self.prime, 0))) // N8)
        header = wtns_header(N8, self.prime, count)
        with open(path, "rb") as f:
            head = f.read(len(header))
            if head != header or size != len(header) + count * N8:
                raise self._fail(where, f"it wrote an unreadable witness (not a .wtns of "
                                 f"{N8}-byte values over the circuit's prime: {size} bytes)")
            return _read_exactly(f, count * N8)

    def _calculate_on_server(self, work: str, limit: float, where: str) -> bytearray:
        """The witness of ``work``/input.json from a kept-running server (an idle one, else a
        new one); failures read as the binary's own (:meth:`_what_happened`)."""
        for attempt in (1, 2):
            server = self._take_server()
            with self._watched(server.proc) as watch:
                try:
                    answer = server.request(work, limit)
                except BaseException:  # KeyboardInterrupt in this thread: take it along
                    server.close()
                    raise
            if watch.interrupted:
                server.close()
                raise self._interrupted_error(where)
            if answer.ok:
                break
            if answer.timed_out:
                raise self._timeout_error(where, limit)
            if answer.garbled:
                raise self._fail(where, f"its server ({self.server_path}) answered something "
                                 "other than 'ok <values> <bytes each> <prime>': rebuild it "
                                 "with cuzk-tasks native-server")
            # exit 0 before a word of this request: it ended idle as the request came
            if not (answer.status == 0 and attempt == 1
                    and not os.path.exists(os.path.join(work, "stdout"))):
                raise self._fail(where, self._what_happened(work, answer.status))
        out_path = os.path.join(work, "witness.bin")
        size = os.path.getsize(out_path) if os.path.exists(out_path) else -1
        if answer.prime != self.prime or answer.n8 != N8 or size != answer.count * N8:
            server.close()
            raise self._fail(where, f"its server ({self.server_path}) answered a witness of "
                             f"{answer.count} values of {answer.n8} bytes in a {size}-byte file "
                             "over another prime: rebuild it with cuzk-tasks native-server")
        self._give_back(server)
        with open(out_path, "rb") as f:
            return _read_exactly(f, size)

    def _take_server(self) -> WitnessServer:
        max_witnesses = defaults.NATIVE_SERVER_MAX_WITNESSES
        with self._lock:
            idle, self._idle = self._idle, []
        for server in idle:  # one at most; the rest would only be races
            if server.fresh_enough(max_witnesses):
                return server
            if server.owner == os.getpid():  # a fork's parent's server is not this one's
                server.close()
        return WitnessServer(self.server_path, self.dat_path, defaults.NATIVE_SERVER_IDLE_S)

    def _give_back(self, server: WitnessServer):
        with self._lock:
            if not self._idle:
                self._idle.append(server)
                return
        server.close()  # another thread's server is idle already: one is kept

    def close(self):
        """End the idle server, if any (a running calculation keeps its own)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for server in idle:
            if server.owner == os.getpid():
                server.close()

    def _run(self, work: str, in_path: str, out_path: str, limit: float, where: str) -> int:
        with open(os.path.join(work, "stdout"), "wb") as out, \
                open(os.path.join(work, "stderr"), "wb") as err:
            try:
                # argv[0] is the binary's path: circom's main() opens argv[0] + ".dat"
                proc = subprocess.Popen([self.binary_path, in_path, out_path], cwd=work,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True, close_fds=True,
                                        preexec_fn=_set_pdeathsig)
            except OSError as exc:
                raise self._fail(where, f"cannot start it ({exc.strerror or exc})") from None
        timed_out = False
        with self._watched(proc) as watch:
            try:
                status = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
                status = proc.wait()
            except BaseException:  # KeyboardInterrupt in this thread: take the binary along
                kill_group(proc)
                proc.wait()
                raise
        if watch.interrupted:
            raise self._interrupted_error(where)
        if timed_out:
            raise self._timeout_error(where, limit)
        return status

    def _what_happened(self, work: str, status: int) -> str:
        """What a failed run did, from its exit status and circom's own diagnostic lines (never
        anything else it printed: a circuit's log() output may hold input values)."""
        if status < 0:
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            how = f"killed by {name}"
        else:
            how = f"exit status {status}"
        said = None
        for stream, pattern in (("stdout", _ASSERT_LINE), ("stderr", _LIBC_ASSERT),
                                ("stderr", _NOT_ALL_SET)):
            m = pattern.search(_tail(os.path.join(work, stream)))
            if m:
                said = m.group(0)[:QUOTE_CHARS]
                break
        if said is None:
            return how
        if pattern is _NOT_ALL_SET:
            return f"{how}: {said}"
        return f"{said} ({how})"

    def calculate_wtns(self, inputs: dict, input_path: str = "<input>",
                       time_limit_s: Optional[float] = None) -> bytes:
        """The .wtns file bytes, identical to ``snarkjs wtns calculate`` (without numpy)."""
        return wtns_file_bytes(self.calculate_packed(inputs, input_path, time_limit_s), N8,
                               self.prime)

    def calculate_file(self, input_json_path,
                       time_limit_s: Optional[float] = None) -> np.ndarray:
        return self.calculate(load_input_json(input_json_path), os.fspath(input_json_path),
                              time_limit_s)


def _read_exactly(f, size: int) -> bytearray:
    """``size`` bytes of ``f`` into a new bytearray (numpy then views it writable, no copy)."""
    buf = bytearray(size)
    view, done = memoryview(buf), 0
    while done < size:
        n = f.readinto(view[done:])
        if not n:
            raise OSError(f"{f.name}: {size - done} bytes short")
        done += n
    return buf


def _tail(path: str, limit: int = 64 * 1024) -> str:
    """The last ``limit`` bytes of the file at ``path`` as text ('' when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


_GENERATORS = StampedCache()


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


def get_native(binary_path) -> NativeWitnessGenerator:
    """A cached NativeWitnessGenerator per binary path (made again when the binary, its .dat
    or its server change)."""
    p = os.path.abspath(os.fspath(binary_path))
    try:
        stamp = (_stamp(p), _stamp(p + ".dat"))
    except FileNotFoundError:
        return NativeWitnessGenerator(p)  # which says which file is missing
    try:
        stamp += (_stamp(server_path(p)),)
    except OSError:
        stamp += (None,)  # no server (yet): one built later is picked up
    return _GENERATORS.get(p, stamp, lambda: NativeWitnessGenerator(p))


def get_generator(spec):
    """The cached witness generator for the spec ``spec``: ``native:<path>`` ->
    :func:`get_native`, anything else a wasm path -> :func:`.witness.get_calculator`."""
    spec = os.fspath(spec)
    if is_native(spec):
        path = native_binary(spec)
        if not path:
            raise FormatError(spec, "spec", "expected native:<path to circom's C++ witness "
                              "generator>")
        return get_native(path)
    # lazy: the wasm calculator loads wasmtime, which the native path never needs
    from .witness import get_calculator

    return get_calculator(spec)


def generator_path(spec) -> str:
    """The file a spec names (the binary of ``native:<path>``, else the wasm)."""
    spec = os.fspath(spec)
    return native_binary(spec) if is_native(spec) else spec


def generate_witness(spec, input_json_path, wtns_out_path) -> int:
    """Compute the witness for ``input_json_path`` with the generator ``spec`` names and write
    ``wtns_out_path``; returns the number of witness values."""
    if not is_native(os.fspath(spec)):
        # the wasm path writes its packed values as they come, without numpy
        from .witness import generate_witness as generate_with_wasm

        return generate_with_wasm(spec, input_json_path, wtns_out_path)
    gen = get_generator(spec)
    packed = gen.calculate_packed(load_input_json(input_json_path), os.fspath(input_json_path))
    with atomic_output(wtns_out_path) as f:
        f.write(wtns_file_bytes(packed, N8, gen.prime))
    return len(packed) // N8
