"""In-process circom 2 witness generation with wasmtime.

Implements the witness-calculator ABI of circom 2 ``.wasm`` files (the one
``snarkjs wtns calculate`` drives through circom_runtime):

* imports, module ``runtime``: ``exceptionHandler(code)``,
  ``printErrorMessage()``, ``writeBufferMessage()``, ``showSharedRWMemory()``;
* exports: ``getVersion``, ``getFieldNumLen32``, ``getRawPrime``,
  ``readSharedRWMemory``/``writeSharedRWMemory`` (32-bit words, least
  significant first), ``init``, ``getInputSignalSize``, ``setInputSignal``,
  ``getInputSize``, ``getWitnessSize``, ``getWitness``, ``getMessageChar``
  and, since circom 2.1, ``getSharedRWMemoryStart``;
* input signals are addressed by the 64-bit FNV-1a hash of their name, split
  into the most and least significant 32-bit halves.

The produced ``.wtns`` bytes are identical to ``snarkjs wtns calculate``.

No call per wire: a Python call into wasm costs 20-90 us in wasmtime-py (it checks the
function's type on every call), which made a 65,000-wire witness take seconds.  A small
helper module (:data:`BULK_WAT`), instantiated in the circuit's store and linked to the
circuit instance's exports (``getWitness``, ``readSharedRWMemory``, ``writeSharedRWMemory``,
``setInputSignal``: the circom ABI alone, so any circom 2 wasm works), loops over the wires and
the input values inside wasm, through its own linear memory, which Python reads and writes
once per batch.  Compiled modules are cached across processes (:mod:`.wasm_cache`).  Before
a circuit is compiled, the circom runtime's Montgomery arithmetic is rewritten on 64-bit limbs
where wasmtime has wide arithmetic (:mod:`.wasm_montgomery`: same results, bit for bit; about
half the witness time of SHA-256 circuits) and its small helpers are inlined at their calls
(:mod:`.wasm_inline`: about 15 % more).
This module imports no numpy until :meth:`WitnessCalculator.calculate` returns an array:
``cuzk-tasks witness`` writes the packed values as they come (:mod:`.wtnsfile`).

Every calculation runs under a time limit (wasmtime epoch interruption, :class:`_EpochTicker`):
a wasm call cannot be stopped from Python otherwise -- no signal handler runs until it returns
-- so a circuit that never returns would hold its process until something killed it.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import struct
import threading
from typing import Dict, List, Optional, Tuple

from ..errors import FormatError, WitnessError, WitnessInterrupted, WitnessTimeoutError
from ..paths import atomic_output
from ..settings import defaults
from .formats.circom_input import js_bigint as _js_bigint, js_int, load_input_json, \
    qualify as _qualify  # noqa: F401 (js_int, load_input_json: re-exported)
from .formats.wtnsfile import wtns_file_bytes, wtns_header
from .stamped_cache import StampedCache

try:  # imported lazily so the readers work without wasmtime installed
    import wasmtime

    from . import wasm_cache, wasm_inline, wasm_montgomery
except ImportError:  # pragma: no cover
    wasmtime = wasm_cache = wasm_inline = wasm_montgomery = None

log = logging.getLogger(__name__)

# Error codes of circom's runtime, mapped as circom's witness_calculator.js does.
CIRCOM_ERRORS = {
    1: "Signal not found.",
    2: "Too many signals set.",
    3: "Signal already set.",
    4: "Assert Failed.",
    5: "Not enough memory.",
    6: "Input signal array access exceeds the size.",
}

#: how often the epoch of an engine with calculations running advances: the resolution of the
#: time limit (a store traps at its deadline tick; checked on wasm function entries and loop
#: back-edges, a load and a compare)
EPOCH_TICK_S = 0.1

#: the bulk helper (wasm text): linked to a circuit instance's exports in its store.
#: ``readWitness(first, count, n32)``: witness values first .. first+count-1, n32 words each
#: (least significant first, as readSharedRWMemory gives them), packed into its memory at 0.
#: ``setInputs(count, n32)``: the records packed at 0, each ``msb, lsb, index`` and the n32
#: words of the value: writeSharedRWMemory the words, then setInputSignal(msb, lsb, index).
#: The global ``at`` is the wire or record being handled: after a circom exception (raised
#: by the runtime's exceptionHandler through both modules) it names the input signal.
BULK_WAT = """(module
  (import "circuit" "getWitness" (func $getWitness (param i32)))
  (import "circuit" "readSharedRWMemory" (func $read (param i32) (result i32)))
  (import "circuit" "writeSharedRWMemory" (func $write (param i32 i32)))
  (import "circuit" "setInputSignal" (func $setInput (param i32 i32 i32)))
  (memory (export "memory") 1)
  (global $at (export "at") (mut i32) (i32.const 0))
  (func (export "readWitness") (param $first i32) (param $count i32) (param $n32 i32)
    (local $end i32) (local $j i32) (local $p i32)
    (local.set $end (i32.add (local.get $first) (local.get $count)))
    (global.set $at (local.get $first))
    (block $wires_done
      (loop $wires
        (br_if $wires_done (i32.ge_u (global.get $at) (local.get $end)))
        (call $getWitness (global.get $at))
        (local.set $j (i32.const 0))
        (block $words_done
          (loop $words
            (br_if $words_done (i32.ge_u (local.get $j) (local.get $n32)))
            (i32.store (local.get $p) (call $read (local.get $j)))
            (local.set $p (i32.add (local.get $p) (i32.const 4)))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $words)))
        (global.set $at (i32.add (global.get $at) (i32.const 1)))
        (br $wires))))
  (func (export "setInputs") (param $count i32) (param $n32 i32)
    (local $j i32) (local $p i32)
    (global.set $at (i32.const 0))
    (block $values_done
      (loop $values
        (br_if $values_done (i32.ge_u (global.get $at) (local.get $count)))
        (local.set $j (i32.const 0))
        (block $words_done
          (loop $words
            (br_if $words_done (i32.ge_u (local.get $j) (local.get $n32)))
            (call $write (local.get $j)
                  (i32.load (i32.add (i32.add (local.get $p) (i32.const 12))
                                     (i32.shl (local.get $j) (i32.const 2)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $words)))
        (call $setInput (i32.load (local.get $p))
                        (i32.load offset=4 (local.get $p))
                        (i32.load offset=8 (local.get $p)))
        (local.set $p (i32.add (local.get $p)
                               (i32.add (i32.const 12) (i32.shl (local.get $n32) (i32.const 2)))))
        (global.set $at (i32.add (global.get $at) (i32.const 1)))
        (br $values))))
)"""

#: the circuit exports BULK_WAT imports, with their circom 2 types: (params, results)
_BULK_IMPORTS = {
    "getWitness": (["i32"], []),
    "readSharedRWMemory": (["i32"], ["i32"]),
    "writeSharedRWMemory": (["i32", "i32"], []),
    "setInputSignal": (["i32", "i32", "i32"], []),
}

#: the most witness bytes one readWitness call packs (its memory grows to this at most)
BULK_CHUNK_BYTES = 16 << 20
_WASM_PAGE = 65536
_RECORD_HEAD = struct.Struct("<III")  # msb, lsb, index of one setInputs record

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def fnv1a64(name: str) -> int:
    """64-bit FNV-1a over the UTF-16 code units of ``name`` (as circom's JS)."""
    h = _FNV_OFFSET
    units = name.encode("utf-16-le")
    for i in range(0, len(units), 2):
        h ^= units[i] | (units[i + 1] << 8)
        h = (h * _FNV_PRIME) & _MASK64
    return h


def _split(h: int) -> Tuple[int, int]:
    return h >> 32, h & 0xFFFFFFFF


# --------------------------------------------------------------------------
# the calculator
# --------------------------------------------------------------------------
class _CircomException(Exception):
    def __init__(self, code: int, message: str):
        self.code = code
        self.message = message
        super().__init__(message)


def _find_sym(wasm_path: str) -> Optional[str]:
    d = os.path.dirname(os.path.abspath(wasm_path))
    stem = os.path.splitext(os.path.basename(wasm_path))[0]
    cands = [os.path.join(d, stem + ".sym"), os.path.join(d, "circuit.sym")]
    if d.endswith("_js"):
        parent = os.path.dirname(d)
        cands += [os.path.join(parent, stem + ".sym"),
                  os.path.join(parent, os.path.basename(d)[:-3] + ".sym")]
    for c in cands:
        if os.path.isfile(c):
            return c
    return None


def _sym_main_names(sym_path: str) -> List[str]:
    """Top-level signal names (``main.x[3]`` -> ``x``) from a circom .sym file."""
    names = []
    seen = set()
    try:
        with open(sym_path, "r", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(",", 3)
                if len(parts) != 4 or not parts[3].startswith("main."):
                    continue
                rest = parts[3][5:]
                if "." in rest:  # signal of a sub-component (or bus field)
                    rest_base = rest.split("[", 1)[0]
                    if "." in rest_base:
                        continue
                base = rest.split("[", 1)[0]
                if base not in seen:
                    seen.add(base)
                    names.append(base)
    except OSError:
        return []
    return names


class _EpochTicker:
    """The time limits of one engine's calculations (wasmtime epoch interruption).

    While at least one calculation runs, a daemon thread advances the engine's epoch every
    :data:`EPOCH_TICK_S`; each store's deadline is its limit in ticks (+1: the first tick may
    come at once), so it traps (``TrapCode.INTERRUPT``) between ``limit`` and ``limit`` + a
    tick after it began, whatever other calculations of the engine do.  The thread stops when
    the last calculation ends.  :meth:`interrupt` advances the epoch past every running
    deadline at once."""

    def __init__(self, engine):
        self._engine = engine
        self._pid = None
        self._reset_after_fork()

    def _reset_after_fork(self):
        """A forked child starts afresh: the parent's thread is not here, and its lock may
        have been held at the fork."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._epoch = 0  # ticks so far: the engine's epoch, as far as this object moved it
        self._deadlines: Dict[int, int] = {}  # calculation id -> its deadline epoch
        self._interrupted: set = set()  # calculation ids stopped by interrupt()
        self._next_id = 0
        self._ticking = False  # a ticker thread runs

    def begin(self, limit_s: float) -> Tuple[int, int]:
        """Register a calculation of ``limit_s`` seconds: (its id, its deadline in ticks)."""
        self._reset_after_fork()
        ticks = max(1, math.ceil(limit_s / EPOCH_TICK_S)) + 1
        with self._cond:
            self._next_id += 1
            cid = self._next_id
            self._deadlines[cid] = self._epoch + ticks
            if not self._ticking:
                self._ticking = True
                threading.Thread(target=self._run, name="cuzk-wasm-epoch", daemon=True).start()
        return cid, ticks

    def end(self, cid: int) -> bool:
        """Unregister calculation ``cid``; True when :meth:`interrupt` stopped it."""
        with self._cond:
            self._deadlines.pop(cid, None)
            interrupted = cid in self._interrupted
            self._interrupted.discard(cid)
            return interrupted

    def interrupt(self) -> int:
        """Stop every running calculation: their next wasm instruction traps.  Returns how
        many were running."""
        with self._cond:
            running = list(self._deadlines)
            if not running:
                return 0
            self._interrupted.update(running)
            target = max(self._deadlines.values())
            while self._epoch < target:  # ~1.4 us a step: 20 ms for a 1500 s limit
                self._engine.increment_epoch()
                self._epoch += 1
            return len(running)

    def _run(self):
        with self._cond:
            while self._deadlines:
                self._cond.wait(EPOCH_TICK_S)
                self._engine.increment_epoch()
                self._epoch += 1
            self._ticking = False  # the next begin() starts a thread again


class WitnessCalculator:
    """A compiled circom 2 witness generator; ``calculate`` may be called often.

    The module is compiled once (and cached across processes: ``cache_dir``, default
    ``defaults.wasm_cache_dir()``; None: none; see :mod:`.wasm_cache`, whose entries must be
    trusted).  A calculation runs in the instance the last successful one left (circom's
    ``init`` resets it, as snarkjs relies on; ``keep_instance_mib``, default
    ``defaults.WITNESS_KEEP_INSTANCE_MIB``, bounds what is kept) or in a fresh one; the
    instance of a failed calculation (assert, trap, time limit) is dropped, so it never
    poisons the next one.
    Every wasm call runs under a time limit (``time_limit_s``, default
    ``defaults.witness_time_limit_s()``); :meth:`interrupt` stops the running ones.
    Thread-safe.
    """

    #: the engine settings that change compiled code (part of a cache entry's name)
    ENGINE_SETTINGS = "epoch"

    def __init__(self, wasm_path, sym_path=None, cache_dir=defaults.wasm_cache_dir,
                 keep_instance_mib: float = defaults.WITNESS_KEEP_INSTANCE_MIB):
        if wasmtime is None:  # pragma: no cover
            raise WitnessError("the 'wasmtime' package is required for witness "
                               "generation (pip install wasmtime)")
        self.wasm_path = os.fspath(wasm_path)
        self.sym_path = os.fspath(sym_path) if sym_path else _find_sym(self.wasm_path)
        self._keep_bytes = int(keep_instance_mib * 2**20)
        self._idle: List[Tuple[int, "_Instance"]] = []  # (pid, instance): at most one
        self._idle_lock = threading.Lock()
        if callable(cache_dir):
            cache_dir = cache_dir()
        config = wasmtime.Config()
        config.epoch_interruption = True  # the time limit (_EpochTicker)
        if wasm_montgomery.supported():
            config.wasm_wide_arithmetic = True
        self._engine = wasmtime.Engine(config)
        self._ticker = _EpochTicker(self._engine)
        try:
            with open(self.wasm_path, "rb") as f:
                wasm = f.read()
            self._module = wasm_cache.compiled_module(
                self._engine, wasm, self.compile_settings(), cache_dir, self.wasm_path,
                prepare=self._prepare)
        except FileNotFoundError:
            raise FormatError(self.wasm_path, "file", "no such file") from None
        except Exception as exc:  # wasmtime.WasmtimeError
            raise FormatError(self.wasm_path, "wasm", f"cannot compile: {exc}") from None
        exports = {e.name: e.type for e in self._module.exports}
        need = {"getVersion", "getFieldNumLen32", "getRawPrime", "readSharedRWMemory",
                "writeSharedRWMemory", "init", "getInputSignalSize", "setInputSignal",
                "getWitnessSize", "getWitness", "getInputSize", "getMessageChar"}
        missing = sorted(need - set(exports))
        if missing:
            raise FormatError(self.wasm_path, "exports",
                              "not a circom >= 2.0.8 witness generator (missing "
                              f"{', '.join(missing)})")
        for name, (params, results) in _BULK_IMPORTS.items():
            ty = exports[name]
            got = (isinstance(ty, wasmtime.FuncType)
                   and ([str(t) for t in ty.params], [str(t) for t in ty.results]))
            if got != (params, results):
                raise FormatError(self.wasm_path, "exports",
                                  f"{name} is not a function ({', '.join(params)}) -> "
                                  f"({', '.join(results)}) as in circom 2")
        self._bulk_module = wasm_cache.compiled_module(
            self._engine, _bulk_wasm(), self._engine_settings(), cache_dir, "the bulk helper")
        # read the constants once
        try:
            with self._instantiate(defaults.witness_time_limit_s()) as inst:
                ex = inst.ex
                st = inst.store
                self.version = (ex["getVersion"](st),
                                ex["getMinorVersion"](st) if "getMinorVersion" in ex else 0,
                                ex["getPatchVersion"](st) if "getPatchVersion" in ex else 0)
                if self.version[0] != 2:
                    raise FormatError(self.wasm_path, "version",
                                      f"circom major version {self.version[0]}, expected 2")
                self.n32 = ex["getFieldNumLen32"](st)
                ex["getRawPrime"](st)
                self.prime = inst.read_shared()
                self.witness_size = ex["getWitnessSize"](st)
                self.input_size = ex["getInputSize"](st)
        except _WasmStopped as stop:
            raise stop.error(self.wasm_path, "reading its constants") from None

    @staticmethod
    def _engine_settings() -> str:
        """The engine settings that change compiled code: :data:`ENGINE_SETTINGS`, plus
        ``wide`` where wasmtime has wide arithmetic (then always on)."""
        wide = wasm_montgomery.supported()
        return WitnessCalculator.ENGINE_SETTINGS + ("+wide" if wide else "")

    @classmethod
    def compile_settings(cls) -> str:
        """What, besides the circuit's wasm, its compiled module depends on: the engine
        settings and the versions of :meth:`prepared`'s rewrites.  With the wasm's hash it
        names the compiled-module cache entry (:func:`.wasm_cache.entry_name`)."""
        tags = [wasm_montgomery.TAG] if wasm_montgomery.supported() else []
        return "+".join([cls._engine_settings(), *tags, wasm_inline.TAG])

    @staticmethod
    def prepared(wasm: bytes) -> bytes:
        """The module compiled for a circuit's ``wasm``: its Montgomery arithmetic on 64-bit
        limbs (where wasmtime has wide arithmetic) and its small functions inlined, each
        where it recognises the module (else the module as it was)."""
        if wasm_montgomery.supported():
            wasm = wasm_montgomery.rewrite(wasm) or wasm
        return wasm_inline.inline(wasm) or wasm

    def _prepare(self, wasm: bytes) -> bytes:
        """:meth:`prepared`, or ``wasm`` itself should the rewritten module not validate (a
        rewrite's bug must not make a circuit unusable; the tests say it does not happen)."""
        fast = self.prepared(wasm)
        if fast is not wasm:
            try:
                wasmtime.Module.validate(self._engine, fast)
            except wasmtime.WasmtimeError as exc:
                log.warning("%s: the sped-up module does not validate (%s); compiling it as "
                            "it is", self.wasm_path, str(exc).splitlines()[0] if str(exc) else
                            type(exc).__name__)
                return wasm
        return fast

    @property
    def fast_montgomery(self) -> bool:
        """Whether the circuit runs with 64-bit-limb field arithmetic (reads the wasm)."""
        with open(self.wasm_path, "rb") as f:
            return wasm_montgomery.supported() and wasm_montgomery.rewrite(f.read()) is not None

    def interrupt(self) -> int:
        """Stop every calculation running on this calculator (any thread): it raises
        :class:`WitnessInterrupted` at its next wasm instruction.  Returns how many ran.
        Safe from a signal handler or another thread."""
        return self._ticker.interrupt()

    # -- internals ---------------------------------------------------------
    def _instantiate(self, time_limit_s: float) -> "_Instance":
        """The kept instance (:meth:`_keep`), armed with ``time_limit_s``, or a fresh one."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for pid, inst in idle:
            if pid == os.getpid():
                return inst.arm(time_limit_s)
            inst.close()  # a forked child's copy of its parent's: not used, in case
        return _Instance(self, time_limit_s)

    def _keep(self, inst: "_Instance") -> bool:
        """Keep ``inst`` (its calculation succeeded) for the next calculation when nothing is
        kept yet and its memories fit ``keep_instance_mib``."""
        if inst.memory_bytes() > self._keep_bytes:
            return False
        with self._idle_lock:
            if self._idle:
                return False
            self._idle.append((os.getpid(), inst))
            return True

    def _fail(self, input_path, msg: str) -> WitnessError:
        return WitnessError(f"{input_path}: {msg}")

    def _set_inputs(self, inst: "_Instance", inputs: dict, input_path: str):
        """Check the inputs against the circuit (one getInputSignalSize call per signal)
        and parse them all, then set them all in one helper call
        (:meth:`_Instance.set_inputs`).  The errors are those, and in the order, of setting
        each value as it is parsed: a bad value or signal after values the circuit refuses (a
        circom error setting an earlier signal, or its assert once the last input is set) is
        reported only once those earlier values have been set without an error."""
        ex, st = inst.ex, inst.store
        try:
            ex["init"](st, 0)
        except _CircomException as exc:
            raise self._circom_error(exc, input_path) from None
        qualified: Dict[str, list] = {}
        _qualify("", inputs, qualified, input_path)
        n8 = self.n32 * 4
        records = bytearray()
        signals: List[str] = []  # the signal of each record
        try:
            for name, flat in qualified.items():
                h = fnv1a64(name)
                msb, lsb = _split(h)
                size = ex["getInputSignalSize"](st, msb, lsb)
                # circom >= 2.1 answers 0 (older: -1) for a hash that is no input
                if size < 0 or (size == 0 and flat):
                    known = self._input_names(inst.time_limit_s)
                    hint = f" (circuit inputs: {', '.join(known)})" if known else ""
                    raise self._fail(input_path,
                                     f"signal '{name}' is not an input of circuit "
                                     f"{self.wasm_path}{hint}")
                if len(flat) != size:
                    raise self._fail(input_path,
                                     f"input signal '{name}' has {len(flat)} value(s), "
                                     f"the circuit expects {size}")
                for i, v in enumerate(flat):
                    try:
                        n = _js_bigint(v, f"{input_path}: '{name}'")
                    except ValueError as exc:
                        raise self._fail(input_path,
                                         f"input signal '{name}'[{i}]: {exc}") from None
                    records += _RECORD_HEAD.pack(msb, lsb, i)
                    records += (n % self.prime).to_bytes(n8, "little")
                    signals.append(name)
        except WitnessError:
            # the values before it were set before this error was found: their error first
            self._set_all(inst, records, signals, input_path)
            raise
        self._set_all(inst, records, signals, input_path)
        counter = len(signals)
        if counter < self.input_size:
            missing = self._missing_inputs(qualified, inst.time_limit_s)
            if missing:
                what = ", ".join(f"'{m}' ({s} value{'s' if s != 1 else ''})"
                                 for m, s in missing)
                raise self._fail(input_path,
                                 f"missing input signal(s) {what}: only {counter} of "
                                 f"the circuit's {self.input_size} input values are set")
            raise self._fail(input_path,
                             f"missing input signal(s): only {counter} of the circuit's "
                             f"{self.input_size} input values are set (no .sym file "
                             f"next to {self.wasm_path} to name the missing signals; "
                             f"given: {', '.join(qualified) or 'none'})")

    def _set_all(self, inst: "_Instance", records: bytearray, signals: List[str],
                 input_path: str):
        """Set the input values of ``records`` (one per entry of ``signals``); a circom
        error names the signal it was setting (as circom's witness_calculator.js does)."""
        if not signals:
            return
        try:
            inst.set_inputs(records, len(signals))
        except _CircomException as exc:
            name = signals[min(inst.bulk_position(), len(signals) - 1)]
            raise self._circom_error(
                exc, input_path, name if exc.code in (1, 2, 3, 6) else None) from None

    def _input_names(self, time_limit_s: float) -> List[str]:
        """Names of the circuit's inputs (needs a .sym file; else [])."""
        if not self.sym_path:
            return []
        out = []
        with self._instantiate(time_limit_s) as inst:
            for base in _sym_main_names(self.sym_path):
                msb, lsb = _split(fnv1a64(base))
                if inst.ex["getInputSignalSize"](inst.store, msb, lsb) > 0:
                    out.append(base)
        return out

    def _missing_inputs(self, given: dict, time_limit_s: float) -> List[Tuple[str, int]]:
        if not self.sym_path:
            return []
        out = []
        with self._instantiate(time_limit_s) as inst:
            for base in _sym_main_names(self.sym_path):
                if base in given:
                    continue
                msb, lsb = _split(fnv1a64(base))
                size = inst.ex["getInputSignalSize"](inst.store, msb, lsb)
                if size > 0:
                    out.append((base, size))
        return out

    def _circom_error(self, exc: "_CircomException", input_path, signal=None):
        err = WitnessError(f"{input_path}: witness generation failed in "
                           f"{self.wasm_path}"
                           + (f" (setting input signal '{signal}')" if signal else "")
                           + f": {exc.message}")
        err.code = exc.code
        err.circom_message = exc.message
        err.input_path = input_path
        return err

    # -- public API ----------------------------------------------------------
    def input_map(self, time_limit_s: Optional[float] = None) -> Optional[Dict[str, int]]:
        """``{signal name: number of values}`` of the circuit's inputs, as input.json names
        them; None when they cannot all be named: no .sym file next to the wasm, or inputs
        its top-level names do not cover (bus inputs)."""
        if not self.sym_path:
            return None
        limit = defaults.witness_time_limit_s() if time_limit_s is None else time_limit_s
        out: Dict[str, int] = {}
        with self._instantiate(limit) as inst:
            for base in _sym_main_names(self.sym_path):
                msb, lsb = _split(fnv1a64(base))
                size = inst.ex["getInputSignalSize"](inst.store, msb, lsb)
                if size > 0:
                    out[base] = size
        return out if sum(out.values()) == self.input_size else None

    def calculate(self, inputs: dict, input_path: str = "<input>",
                  time_limit_s: Optional[float] = None):
        """Witness as an (nWitness, 4) uint64 numpy array, standard form.

        ``time_limit_s`` (default ``defaults.witness_time_limit_s()``) bounds each wasm
        instance it runs: past it, :class:`WitnessTimeoutError` ("witness generation exceeded
        N s").  A wasm trap is a :class:`WitnessError` ("wasm trap: ..."), naming the file."""
        # lazy: the witness command line writes the packed bytes and never loads numpy
        import numpy as np

        packed = self.calculate_packed(inputs, input_path, time_limit_s)
        return np.frombuffer(packed, dtype="<u8").reshape(-1, self.n32 // 2)

    def calculate_packed(self, inputs: dict, input_path: str = "<input>",
                         time_limit_s: Optional[float] = None) -> bytearray:
        """The witness values packed as in a .wtns file's values section: ``4 * n32`` bytes
        each, little endian, standard form.  As :meth:`calculate` otherwise."""
        if not isinstance(inputs, dict):
            raise FormatError(input_path, "json", "expected an object mapping "
                              "signal names to values")
        limit = defaults.witness_time_limit_s() if time_limit_s is None else float(time_limit_s)
        try:
            with self._instantiate(limit) as inst:
                self._set_inputs(inst, inputs, str(input_path))
                try:
                    return inst.read_witness(self.witness_size)
                except _CircomException as exc:
                    raise self._circom_error(exc, input_path) from None
        except _WasmStopped as stop:
            raise stop.error(self.wasm_path, str(input_path)) from None

    def calculate_wtns(self, inputs: dict, input_path: str = "<input>",
                       time_limit_s: Optional[float] = None) -> bytes:
        """The .wtns file bytes, identical to ``snarkjs wtns calculate``."""
        return wtns_file_bytes(self.calculate_packed(inputs, input_path, time_limit_s),
                               self.n32 * 4, self.prime)

    def calculate_file(self, input_json_path, time_limit_s: Optional[float] = None):
        return self.calculate(load_input_json(input_json_path), os.fspath(input_json_path),
                              time_limit_s)


class _WasmStopped(Exception):
    """A wasm call of an :class:`_Instance` trapped (raised by its ``__exit__``, which knows
    whether the trap was its deadline, an interrupt or the module's own fault); ``error``
    makes the CuzkError the caller raises."""

    def __init__(self, kind: str, detail: str, limit_s: float):
        super().__init__(detail)
        self.kind, self.detail, self.limit_s = kind, detail, limit_s

    def error(self, wasm_path: str, where: str) -> WitnessError:
        if self.kind == "timeout":
            return WitnessTimeoutError(f"{where}: witness generation exceeded {self.limit_s:g} s "
                                       f"in {wasm_path} (witness_time_limit_s)")
        if self.kind == "interrupted":
            return WitnessInterrupted(f"{where}: witness generation in {wasm_path} interrupted")
        return WitnessError(f"{where}: witness generation failed in {wasm_path}: {self.detail}")


def _trap_text(exc) -> str:
    """The one line of a wasmtime error that says what happened ("wasm trap: wasm
    `unreachable` instruction executed"), without its backtrace."""
    lines = [ln.strip() for ln in str(getattr(exc, "message", exc) or exc).splitlines()
             if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("wasm trap:"):
            return ln
    return f"wasm error: {lines[-1]}" if lines else f"wasm error: {type(exc).__name__}"


class _Instance:
    """One wasm instance + store for one calculation; use it as a context manager.

    The store must be closed explicitly: its host functions are closures over this object,
    a reference cycle through wasmtime's native store that Python's collector cannot see,
    so an unclosed store -- its whole linear memory -- lived as long as the process (about
    0.2 MB per Poseidon witness).  tests/test_witness.py bounds the growth."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:  # a success: the calculator may keep it
            self._ticker.end(self._cid)
            self._cid = None
            if self._calculator._keep(self):
                return False
        interrupted = self.close()
        if exc_type is not None and wasmtime is not None and \
                issubclass(exc_type, (wasmtime.Trap, wasmtime.WasmtimeError)):
            raise self._stopped(exc, interrupted) from None
        return False

    def _stopped(self, exc, interrupted: bool) -> _WasmStopped:
        code = getattr(exc, "trap_code", None)
        if code == wasmtime.TrapCode.INTERRUPT:
            return _WasmStopped("interrupted" if interrupted else "timeout", "",
                                self.time_limit_s)
        return _WasmStopped("trap", _trap_text(exc), self.time_limit_s)

    def close(self) -> bool:
        """Release the store; True when the ticker's interrupt() stopped this instance."""
        store, self.store = self.store, None
        self.instance = self.ex = self._bulk_ex = None
        if store is not None:
            store.close()
        cid, self._cid = self._cid, None
        return self._ticker.end(cid) if cid is not None else False

    def __init__(self, wc: WitnessCalculator, time_limit_s: float):
        self._calculator = wc
        self._ticker = wc._ticker
        self._bulk_module = wc._bulk_module
        self._bulk_ex = None
        self._cid = None
        self.store = wasmtime.Store(wc._engine)
        # before anything runs: a store of an epoch-interruption engine without a deadline
        # traps at once
        self.arm(time_limit_s)
        try:
            self._setup(wc)
        except BaseException as exc:  # a start function may trap or loop too
            interrupted = self.close()
            if isinstance(exc, (wasmtime.Trap, wasmtime.WasmtimeError)):
                raise self._stopped(exc, interrupted) from None
            raise

    def arm(self, time_limit_s: float) -> "_Instance":
        """Start a calculation's time limit (and clear the messages of the last one)."""
        self.time_limit_s = time_limit_s
        self._cid, ticks = self._ticker.begin(time_limit_s)
        self.store.set_epoch_deadline(ticks)
        self.err_str = ""
        self.msg_str = ""
        self.logs: List[str] = []
        return self

    def memory_bytes(self) -> int:
        """The size of its linear memories (the circuit's and the helper's), bytes; a
        circuit without an exported memory counts as too big to keep."""
        memory = self.ex.get("memory") if self.ex is not None else None
        if not isinstance(memory, wasmtime.Memory):
            return 1 << 62
        size = memory.data_len(self.store)
        if self._bulk_ex is not None:
            size += self._bulk_ex["memory"].data_len(self.store)
        return size

    def _setup(self, wc: WitnessCalculator):
        store = self.store
        i32 = wasmtime.ValType.i32()

        def exception_handler(code):
            text = CIRCOM_ERRORS.get(code, "Unknown error.")
            msg = text + ("\n" + self.err_str if self.err_str else "")
            raise _CircomException(code, msg.rstrip("\n"))

        def print_error_message():
            self.err_str += self._message() + "\n"

        def write_buffer_message():
            msg = self._message()
            if msg == "\n":
                self.logs.append(self.msg_str)
                log.info("circom log: %s", self.msg_str)
                self.msg_str = ""
            else:
                if self.msg_str:
                    self.msg_str += " "
                self.msg_str += msg

        def show_shared_rw_memory():
            if self.msg_str:
                self.msg_str += " "
            self.msg_str += str(self.read_shared())

        funcs = {
            "exceptionHandler": (wasmtime.FuncType([i32], []), exception_handler),
            "printErrorMessage": (wasmtime.FuncType([], []), print_error_message),
            "writeBufferMessage": (wasmtime.FuncType([], []), write_buffer_message),
            "showSharedRWMemory": (wasmtime.FuncType([], []), show_shared_rw_memory),
        }
        imports = []
        for imp in wc._module.imports:
            if imp.module == "runtime" and imp.name in funcs:
                ft, fn = funcs[imp.name]
                imports.append(wasmtime.Func(store, ft, fn))
            elif imp.module == "runtime" and isinstance(imp.type, wasmtime.FuncType):
                imports.append(wasmtime.Func(store, imp.type, lambda *a: None))
            else:
                raise FormatError(wc.wasm_path, "imports",
                                  f"unexpected import {imp.module}.{imp.name}")
        self.instance = wasmtime.Instance(store, wc._module, imports)
        self.ex = self.instance.exports(store)
        self.n32 = self.ex["getFieldNumLen32"](store)

    def _message(self) -> str:
        get = self.ex["getMessageChar"]
        chars = []
        while True:
            c = get(self.store)
            if c == 0:
                break
            chars.append(chr(c))
        return "".join(chars)

    def read_shared(self) -> int:
        rd = self.ex["readSharedRWMemory"]
        v = 0
        for j in range(self.n32):
            v |= (rd(self.store, j) & 0xFFFFFFFF) << (32 * j)
        return v

    # -- the bulk helper (BULK_WAT) -------------------------------------------------
    def _bulk(self):
        """The helper's exports, instantiated in this store on first use."""
        if self._bulk_ex is None:
            ex = self.ex
            helper = wasmtime.Instance(self.store, self._bulk_module,
                                       [ex[name] for name in _BULK_IMPORTS])
            self._bulk_ex = helper.exports(self.store)
        return self._bulk_ex

    def _bulk_memory(self, nbytes: int) -> int:
        """The address of the helper's memory, grown to at least ``nbytes``."""
        mem = self._bulk()["memory"]
        have = mem.data_len(self.store)
        if nbytes > have:
            mem.grow(self.store, -(-(nbytes - have) // _WASM_PAGE))
        return ctypes.addressof(mem.data_ptr(self.store).contents)

    def bulk_position(self) -> int:
        """The wire or input record the helper's last call was at (where it stopped)."""
        return self._bulk()["at"].value(self.store)

    def set_inputs(self, records: bytearray, count: int):
        """Set ``count`` input values packed in ``records`` (``msb, lsb, index`` as uint32
        and the value's n32 words each) in one call."""
        addr = self._bulk_memory(len(records))
        ctypes.memmove(addr, (ctypes.c_char * len(records)).from_buffer(records), len(records))
        self._bulk()["setInputs"](self.store, count, self.n32)

    def read_witness(self, n: int) -> bytearray:
        """Witness values 0 .. n-1, packed (``4 * n32`` bytes each, little endian): one
        helper call per :data:`BULK_CHUNK_BYTES` of them."""
        n8 = self.n32 * 4
        out = bytearray(n * n8)
        if n == 0:
            return out
        per_call = max(1, BULK_CHUNK_BYTES // n8)
        read = self._bulk()["readWitness"]
        dest = (ctypes.c_char * len(out)).from_buffer(out)
        try:
            base = ctypes.addressof(dest)
            for first in range(0, n, per_call):
                count = min(per_call, n - first)
                src = self._bulk_memory(count * n8)
                read(self.store, first, count, self.n32)
                ctypes.memmove(base + first * n8, src, count * n8)
        finally:
            del dest  # releases ``out``'s buffer (a bytearray with an export cannot resize)
        # cross-check the helper against the ABI on the last value
        if self.read_shared().to_bytes(n8, "little") != out[-n8:]:
            raise WitnessError("internal error: the witness read in bulk differs from "
                               "readSharedRWMemory")
        return out


_BULK_WASM: Optional[bytes] = None


def _bulk_wasm() -> bytes:
    """BULK_WAT assembled (once per process)."""
    global _BULK_WASM
    if _BULK_WASM is None:
        _BULK_WASM = wasmtime.wat2wasm(BULK_WAT)
    return _BULK_WASM


_CALCULATORS = StampedCache()


def get_calculator(wasm_path) -> WitnessCalculator:
    """A cached WitnessCalculator per wasm path (recompiled if the file changes)."""
    p = os.path.abspath(os.fspath(wasm_path))
    try:
        mtime = os.stat(p).st_mtime_ns
    except FileNotFoundError:
        raise FormatError(wasm_path, "file", "no such file") from None
    return _CALCULATORS.get(p, mtime, lambda: WitnessCalculator(p))


def generate_witness(wasm_path, input_json_path, wtns_out_path) -> int:
    """Compute the witness for ``input_json_path`` and write ``wtns_out_path``.

    Returns the number of witness values.
    """
    wc = get_calculator(wasm_path)
    packed = wc.calculate_packed(load_input_json(input_json_path), os.fspath(input_json_path))
    n8 = wc.n32 * 4
    with atomic_output(wtns_out_path) as f:
        f.write(wtns_header(n8, wc.prime, len(packed) // n8))
        f.write(packed)
    return len(packed) // n8
