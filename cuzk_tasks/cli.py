"""The ``cuzk-tasks`` command line.

Argument order matches snarkjs and rapidsnark so the commands drop in:

    cuzk-tasks prove   circuit.zkey witness.wtns proof.json public.json
    cuzk-tasks verify  verification_key.json public.json proof.json
    cuzk-tasks witness circuit.wasm input.json witness.wtns   (or native:circuit_cpp/circuit)
    cuzk-tasks native-server circuit_cpp/circuit   (keeps circom's C++ generator running)
    cuzk-tasks vkey    circuit.zkey verification_key.json
    cuzk-tasks setup   circuit.r1cs circuit.zkey   (single-party: development only)

Service commands (Celery + Redis; settings from $CUZK_CONFIG / CUZK_* env):

    cuzk-tasks worker --device N [--backend gpu|cpu|auto]
    cuzk-tasks worker --cpu [--concurrency N]
    cuzk-tasks submit CIRCUIT input.json... [--witness w.wtns...] [--wait]
    cuzk-tasks status [JOB]
    cuzk-tasks cancel JOB
    cuzk-tasks web [--bind HOST:PORT] [--workers N]
"""

import sys
import time

from .errors import CuzkError

EXIT_OK, EXIT_INVALID, EXIT_ERROR = 0, 1, 2
#: Ctrl-C (SIGINT), as a shell reports a command it stopped: 128 + 2
EXIT_INTERRUPTED = 130


def _cpu_backend_chosen(name):
    """Will ``--backend`` (None: $CUZK_BACKEND or auto) prove on the CPU core?  Decided
    without importing the backends: auto means the GPU only where an NVIDIA driver is."""
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .settings import defaults
    from .groth16.backends.devices import nvidia_driver_present

    name = (name or defaults.backend_name()).lower()
    return name == "cpu" or (name == "auto" and not nvidia_driver_present())


def _prove_natively(args):
    """The CPU core's whole-file prove (no numpy import); None when it declines, and the
    numpy path then proves, or says exactly what is wrong with which file."""
    # lazy: a command imports only what it runs (here: no numpy)
    from .settings import defaults
    from .errors import NativeCoreError
    from .groth16.backends.native_prove import prove_files

    try:
        return prove_files(args.zkey, args.witness, threads=defaults.thread_count(),
                           verify=not args.no_verify)
    except NativeCoreError as exc:
        _configure_logging(args.verbose)
        _log().debug("whole-file prove declined (%s): numpy path", exc)
        return None


def _cmd_prove(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .groth16.formats.proof_json import dump_json

    t0 = time.perf_counter()
    done = _prove_natively(args) if _cpu_backend_chosen(args.backend) else None
    if done is not None:
        proof, public, timings = done
        backend = "cpu"
    else:
        _configure_logging(args.verbose)  # the backends log (a GPU fallback, for one)
        # lazy: the numpy path, only when the whole-file prove declined or a GPU proves
        from .groth16.backends.select import get_backend
        from .groth16.prover import prove_finish, prove_start
        from .groth16.formats.wtns import read_wtns
        from .groth16.formats.zkey import read_zkey

        zkey = read_zkey(args.zkey)
        witness = read_wtns(args.witness, zkey=zkey)
        # One proof and exit: release each zkey section once consumed (peak RSS ~ one section).
        partial = prove_start(zkey, witness, backend=get_backend(args.backend), release_pages=True)
        proof, public = prove_finish(partial, zkey, witness, verify=not args.no_verify,
                                     release_pages=True)
        timings, backend = partial.timings_ms, partial.backend
    dump_json(proof, args.proof)
    dump_json(public, args.public)
    if args.verbose:
        steps = ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items())
        print(f"proved {args.zkey} on {backend} in {(time.perf_counter() - t0) * 1000:.0f} ms "
              f"({steps})", file=sys.stderr)
    return EXIT_OK


def _cmd_verify(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .groth16.verifier import verify_files

    if verify_files(args.verification_key, args.public, args.proof):
        print("OK: proof is valid")
        return EXIT_OK
    print("INVALID: proof does not verify", file=sys.stderr)
    return EXIT_INVALID


def _cmd_witness(args):
    """The generator runs in a helper thread: a wasm call holds the thread that made it until it
    returns, so the main thread stays free to take Ctrl-C and stop it (the generator's
    interrupt: the wasm's epoch deadline, or killing the native binary), which then returns 130
    after one line on stderr."""
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    import threading

    from .groth16 import native_witness

    outcome = {}

    def run():
        try:
            outcome["calc"] = native_witness.get_generator(args.wasm)
            native_witness.generate_witness(args.wasm, args.input, args.witness)
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc
        finally:
            outcome["done"] = True

    worker = threading.Thread(target=run, name="cuzk-witness", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        _stop_witness(worker, outcome)
        print(f"cuzk-tasks {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if "error" in outcome:
        raise outcome["error"]
    return EXIT_OK


def _stop_witness(worker, outcome, grace_s=2.0):
    """Interrupt the running generator and give its thread ``grace_s`` to clean up (its
    temporary output file, a native binary's process group); a thread still compiling the
    module is left behind (a daemon).  ``outcome["done"]``, not ``worker.is_alive()``, says
    whether it ended: a KeyboardInterrupt inside ``join()`` can leave is_alive() False for a
    thread that still runs (CPython's tstate lock race), and the binary would outlive us."""
    deadline = time.monotonic() + grace_s
    while "done" not in outcome and time.monotonic() < deadline:
        try:
            calc = outcome.get("calc")
            if calc is not None:
                calc.interrupt()  # again: a calculation may have begun since
            worker.join(0.05)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            return


def _cmd_native_server(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .groth16.native_server import build_server

    started = time.monotonic()
    print(f"building the witness server of {args.binary} (a minute or two on a big circuit)",
          file=sys.stderr, flush=True)
    path = build_server(args.binary, cxx=args.cxx)
    print(f"wrote {path} in {time.monotonic() - started:.1f} s: native:{args.binary} now uses it",
          file=sys.stderr)
    print(path)
    return EXIT_OK


def _cmd_vkey(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .groth16.formats import jsonio
    from .groth16.verifier import export_verification_key
    from .groth16.formats.zkey import read_zkey

    jsonio.dump_json(export_verification_key(read_zkey(args.zkey)), args.verification_key)
    return EXIT_OK


def _cmd_setup(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .groth16.setup import DEV_ONLY_NOTICE, setup

    def progress(stage, seconds):
        print(f"setup: {stage}: {seconds:.2f} s", file=sys.stderr, flush=True)

    report = setup(args.r1cs, args.zkey, threads=args.threads,
                   progress=progress if args.verbose else None)
    if args.verbose:
        print(f"setup: {report.curve.snarkjs_name}, {report.n_constraints} constraints, "
              f"nVars={report.n_vars}, nPublic={report.n_public}, "
              f"domainSize={report.domain_size}: {report.seconds:.2f} s", file=sys.stderr)
    # always: whoever runs it must not mistake the zkey for a ceremony's
    print(f"wrote {args.zkey}: {DEV_ONLY_NOTICE}", file=sys.stderr)
    return EXIT_OK


def _settings(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .settings.config import load_settings

    settings = load_settings(getattr(args, "config", None))
    if getattr(args, "redis", None):
        url = args.redis
        settings = settings.replace(redis_url=url, broker_url=url, result_backend=url, state_url=url)
    return settings


def _cmd_worker(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .service import worker

    settings = _settings(args)
    level = "DEBUG" if args.verbose else args.loglevel
    if args.cpu:
        worker.run_cpu_worker(settings, concurrency=args.concurrency, loglevel=level)
    else:
        worker.run_device_worker(settings, args.device, backend=args.backend, loglevel=level)
    return EXIT_OK


_last_progress = [None]


def _cmd_demo(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .dev.demo import run_demo

    return run_demo(jobs=args.jobs, partitions=args.partitions, redis_url=args.redis,
                    keep_running=args.keep_running)


def _progress_bar(job):
    key = (job.get("n_done"), job.get("state"))
    if key == _last_progress[0]:
        return
    _last_progress[0] = key
    total = int(job.get("n_partitions") or 0) or 1
    done = int(job.get("n_done") or 0)
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {job.get('state')}   ")
    sys.stderr.flush()


def _cmd_submit(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    import json

    from .client import Client
    from .paths import absolute_refs

    # absolute here: a worker would resolve a relative path against its own directory
    parts = absolute_refs([{"input_ref": p} for p in args.inputs]
                          + [{"witness_ref": w} for w in args.witness])
    if not parts:
        raise CuzkError("give at least one input.json or --witness .wtns")
    if bool(args.on_done_task) != bool(args.on_done_queue):
        raise CuzkError("give --on-done-task and --on-done-queue together")
    on_done = ({"task": args.on_done_task, "queue": args.on_done_queue}
               if args.on_done_task else None)
    client = Client(settings=_settings(args))
    job_id = client.submit(args.circuit, parts, priority=args.priority, request_id=args.request_id,
                           on_done=on_done, deadline_s=args.deadline_s)
    print(job_id)
    if not args.wait:
        return EXIT_OK
    try:
        result = client.wait(job_id, timeout=args.timeout, progress=_progress_bar)
    finally:
        sys.stderr.write("\n")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    else:
        print(json.dumps(result, indent=1))
    return EXIT_OK


def _fmt_age(seconds):
    if seconds is None or seconds == "":
        return "-"
    seconds = float(seconds)
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def format_snapshot(snap):
    """A terminal table of workers, jobs and queues from ``store.snapshot()``."""
    lines = ["WORKERS", f"  {'id':<28} {'role':<6} {'state':<8} {'job/partition':<40} {'resident'}"]
    for w in snap.get("workers", []):
        wid = w.get("worker_id") or w.get("id", "?")
        part = f"{w.get('job', '')}/{w.get('partition', '')}" if w.get("job") else "-"
        resident = w.get("resident") or ""
        if isinstance(resident, (list, tuple)):
            resident = ",".join(resident)
        lines.append(f"  {wid:<28} {w.get('role', ''):<6} {w.get('state', ''):<8} {part:<40} {resident}")
    lines += ["JOBS", f"  {'id':<34} {'circuit':<14} {'state':<10} {'done':>9}  error"]
    for j in list(snap.get("jobs", [])) + list(snap.get("recent_jobs", [])):
        done = f"{j.get('n_done', 0)}/{j.get('n_partitions', '?')}"
        lines.append(f"  {j.get('id', '?'):<34} {j.get('circuit', ''):<14} {j.get('state', ''):<10} "
                     f"{done:>9}  {j.get('error') or ''}")
    lines.append("QUEUES")
    for name, depth in sorted((snap.get("queues") or {}).items()):
        lines.append(f"  {name:<40} {depth}")
    thr = snap.get("throughput") or []
    if thr:
        lines.append("THROUGHPUT  " + "  ".join(f"{t['window_s']}s: {t['completed']} "
                                                f"({t['per_min']:.1f}/min)" for t in thr))
    refused = snap.get("refused") or []
    if refused:
        total = sum(n for name, n in (snap.get("counters") or {}).items()
                    if name.startswith("requests_rejected:"))
        lines += [f"REFUSED MESSAGES (latest {len(refused)} of {total}; ops/runbook.md#refused-messages)",
                  f"  {'at (UTC)':<19} {'task':<16} {'task id':<36} {'worker':<20} reason"]
        for r in refused:
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(r.get("at") or 0)))
            reason = str(r.get("reason", ""))
            reason = reason if len(reason) <= 100 else reason[:99] + "…"
            lines.append(f"  {at:<19} {r.get('task', ''):<16} {r.get('task_id', ''):<36} "
                         f"{r.get('worker', ''):<20} {reason}")
    return "\n".join(lines)


def _cmd_status(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    import json

    from .client import Client
    from .service.queues import queue_keys
    from .settings import defaults

    settings = _settings(args)
    client = Client(settings=settings)
    if args.job:
        print(json.dumps(client.status(args.job), indent=1, default=str))
        return EXIT_OK
    queues = {name: queue_keys(name) for name in (settings.cpu_queue, settings.stage_queue)}
    for w in client.store.live_device_workers():
        if w.get("queue"):
            queues[w["queue"]] = queue_keys(w["queue"])
    snap = client.store.snapshot(queues)
    snap["refused"] = client.store.rejected_requests(defaults.STATUS_REFUSED_SHOWN)
    print(json.dumps(snap, indent=1, default=str) if args.json else format_snapshot(snap))
    return EXIT_OK


def _cmd_web(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .web.serve import exec_gunicorn

    _settings(args)  # fail early, with the usual message, on bad settings
    exec_gunicorn(bind=args.bind, workers=args.workers, redis_url=args.redis, config=args.config)
    return EXIT_OK  # not reached


def _cmd_cancel(args):
    # lazy: a command imports only what it runs, so cuzk-tasks --help stays fast
    from .client import Client

    if Client(settings=_settings(args)).cancel(args.job):
        print(f"cancelled {args.job}")
        return EXIT_OK
    print(f"job {args.job} is unknown or already finished", file=sys.stderr)
    return EXIT_INVALID


def _service_options(p):
    p.add_argument("--config", help="TOML settings file (default: $CUZK_CONFIG)")
    p.add_argument("--redis", help="Redis URL for broker, results and state (overrides settings)")


def build_parser(only=None):
    """The command line's parser; with ``only`` (a command's name) the parser of that command
    alone: :func:`main` builds just the one it runs, as creating the others' parsers would
    cost a small proof's run another ~15 ms."""
    # lazy: a plain prove command line never needs argparse (see plain_prove_args)
    import argparse

    parser = argparse.ArgumentParser(prog="cuzk-tasks", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print step timings and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def wanted(name):
        return only is None or only == name

    if wanted("prove"):
        p = sub.add_parser("prove", help="make a Groth16 proof (snarkjs groth16 prove compatible)")
        p.add_argument("zkey")
        p.add_argument("witness", help="witness .wtns file")
        p.add_argument("proof", help="output proof.json")
        p.add_argument("public", help="output public.json")
        p.add_argument("--backend", choices=PROVE_BACKENDS, default=None,
                       help="compute backend (default: $CUZK_BACKEND or auto)")
        p.add_argument("--no-verify", action="store_true",
                       help="skip the self-verification pairing check (not recommended)")
        p.set_defaults(**PROVE_DEFAULTS)

    if wanted("verify"):
        p = sub.add_parser("verify", help="verify a proof (snarkjs groth16 verify compatible)")
        p.add_argument("verification_key")
        p.add_argument("public")
        p.add_argument("proof")
        p.set_defaults(func=_cmd_verify)

    if wanted("witness"):
        p = sub.add_parser("witness", help="compute a witness from circom's .wasm (or its C++ "
                           "generator: native:PATH) and an input.json")
        p.add_argument("wasm", help="circuit.wasm, or native:PATH for circom's C++ witness "
                       "generator (circom --c; PATH.dat next to it)")
        p.add_argument("input")
        p.add_argument("witness", help="output .wtns file")
        p.set_defaults(**WITNESS_DEFAULTS)

    if wanted("native-server"):
        p = sub.add_parser("native-server", help="build the kept-running server of circom's C++ "
                           "witness generator (native:PATH then computes witness after witness "
                           "in one process)")
        p.add_argument("binary", help="the generator make built in circom's <name>_cpp "
                       "directory (its main.cpp and objects next to it)")
        p.add_argument("--cxx", default="g++", help="C++ compiler (default: g++)")
        p.set_defaults(func=_cmd_native_server)

    if wanted("vkey"):
        p = sub.add_parser("vkey", help="export the verification key of a zkey")
        p.add_argument("zkey")
        p.add_argument("verification_key", help="output verification_key.json")
        p.set_defaults(func=_cmd_vkey)

    if wanted("setup"):
        p = sub.add_parser(
            "setup", help="single-party Groth16 setup of an r1cs into a snarkjs-compatible zkey "
                          "(development and benchmarks only, NOT for production)",
            description="Fast single-party Groth16 setup on the native core: draws the toxic waste "
                        "(tau, alpha, beta, gamma, delta) itself, uses it once and drops it. FOR "
                        "DEVELOPMENT AND BENCHMARKS ONLY: anyone who saw this process's memory could "
                        "forge proofs; production keys need a multi-party ceremony (snarkjs "
                        "powersoftau + zkey contribute). The curve is the r1cs's (bn128 or bls12381).")
        p.add_argument("r1cs", help="circom circuit.r1cs")
        p.add_argument("zkey", help="output circuit.zkey (snarkjs groth16 layout)")
        p.add_argument("--threads", type=int, default=None,
                       help="native threads (default: $CUZK_THREADS or all cores)")
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="print each stage and its seconds to stderr")
        p.set_defaults(func=_cmd_setup)

    if wanted("worker"):
        p = sub.add_parser("worker", help="run a Celery worker (one per device, or a CPU worker)")
        role = p.add_mutually_exclusive_group(required=True)
        role.add_argument("--device", type=int, metavar="N", help="device ordinal: consume cuzk.dev.<host>.N")
        role.add_argument("--cpu", action="store_true", help="synthesize/finalize/submit on the cpu queue")
        p.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto",
                       help="compute backend of a device worker (default auto)")
        p.add_argument("--concurrency", type=int, default=None, help="processes of a --cpu worker")
        p.add_argument("--loglevel", default="INFO")
        _service_options(p)
        p.set_defaults(func=_cmd_worker)

    if wanted("submit"):
        p = sub.add_parser("submit", help="submit a job: one partition per input.json / --witness")
        p.add_argument("circuit", help="circuit name from the registry ([circuits.NAME])")
        p.add_argument("inputs", nargs="*", help="input.json files on storage the workers share, "
                       "inside their allowed_input_roots (relative paths are made absolute)")
        p.add_argument("--witness", action="append", default=[], help=".wtns file (repeatable)")
        p.add_argument("--priority", type=int, default=None, help="0 (first) .. 9 (last)")
        p.add_argument("--request-id", default=None, help="idempotency key")
        p.add_argument("--deadline-s", type=float, default=None,
                       help="seconds from now after which the job fails \"deadline exceeded\" "
                            "(default: the circuit's deadline_s, else none)")
        p.add_argument("--on-done-task", default=None,
                       help="Celery task sent once when the job ends (kwargs job_id, state, proofs|error)")
        p.add_argument("--on-done-queue", default=None, help="the queue --on-done-task is sent to")
        p.add_argument("--wait", action="store_true", help="wait, with a progress bar on stderr")
        p.add_argument("--timeout", type=float, default=None, help="seconds to --wait")
        p.add_argument("-o", "--output", help="write the result JSON here (with --wait)")
        _service_options(p)
        p.set_defaults(func=_cmd_submit)

    if wanted("status"):
        p = sub.add_parser("status", help="workers, jobs, queues and refused messages (or one job with JOB)")
        p.add_argument("job", nargs="?")
        p.add_argument("--json", action="store_true", help="raw snapshot JSON")
        _service_options(p)
        p.set_defaults(func=_cmd_status)

    if wanted("demo"):
        p = sub.add_parser("demo", help="run the whole service locally (private Redis, workers) "
                                         "and prove a bundled circuit")
        p.add_argument("--jobs", type=int, default=3, help="jobs to submit (default 3)")
        p.add_argument("--partitions", type=int, default=4, help="partitions per job (default 4)")
        p.add_argument("--redis", default=None, help="use this Redis URL instead of starting one")
        p.add_argument("--keep-running", action="store_true", help="keep the stack up until Ctrl-C")
        p.set_defaults(func=_cmd_demo)

    if wanted("web"):
        p = sub.add_parser("web", help="serve the status page (gunicorn, cuzk_tasks/web/gunicorn.conf.py)")
        p.add_argument("--bind", default=None, help="HOST:PORT (default: $CUZK_WEB_BIND or 127.0.0.1:8080)")
        p.add_argument("--workers", type=int, default=None, help="gunicorn worker processes")
        _service_options(p)
        p.set_defaults(func=_cmd_web)

    if wanted("cancel"):
        p = sub.add_parser("cancel", help="cancel a job")
        p.add_argument("job")
        _service_options(p)
        p.set_defaults(func=_cmd_cancel)
    return parser


def _configure_logging(verbose):
    # lazy: `prove` on the CPU core logs nothing unless asked, and the import costs it ~13 ms
    import logging

    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def _log():
    # lazy: see _configure_logging
    import logging

    return logging.getLogger(__name__)


#: every command, in the order --help lists them (tests/test_layering.py checks it is what
#: build_parser builds)
COMMANDS = ('prove', 'verify', 'witness', 'native-server', 'vkey', 'setup', 'worker', 'submit', 'status', 'demo', 'web', 'cancel')


def command_named(argv):
    """The command ``argv`` names (its first word that is not an option), if it is one."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


#: ``prove --backend`` choices
PROVE_BACKENDS = ("auto", "cpu", "gpu")
#: what a ``prove`` command line sets beyond its arguments; logging is configured only when
#: prove needs it (importing it costs a tenth of a small proof)
PROVE_DEFAULTS = {"func": _cmd_prove, "configure_logging": False}
#: what the witness command's parser sets besides its arguments
WITNESS_DEFAULTS = {"func": _cmd_witness, "exit_at_once": True}


def _plain_head(argv, command):
    """``(verbose, the arguments after command)`` when ``argv`` is ``[-v|--verbose]...
    command ...``, else None: the common start of the plain command lines."""
    verbose, i = False, 0
    while i < len(argv) and argv[i] in ("-v", "--verbose"):
        verbose, i = True, i + 1
    if argv[i:i + 1] != [command]:
        return None
    return verbose, argv[i + 1:]


def plain_prove_args(argv):
    """The arguments of a plain ``prove`` command line, parsed without argparse, or None.

    Plain: ``[-v|--verbose] prove`` and then, in any order, four paths that do not start
    with ``-``, ``--backend NAME`` (or ``--backend=NAME``) with a known NAME, and
    ``--no-verify``.  Anything else (help, an abbreviated option, a mistake) is None and
    argparse parses it, with its messages.  Importing argparse (re, gettext, shutil) costs
    ~30 ms here, as much as a whole 2^10-constraint proof, and a plain prove has nothing for
    it to do.  tests/test_layering.py checks that both parsers agree.  Measured 2026-12-05
    (mulchain_1k, medians of 5 fresh processes): 38.6 ms plain against 44.4 ms through
    argparse (+5.8 ms, 15%); proof.json by proof_json.dumps_json against json: +3.0 ms (8%).
    """
    head = _plain_head(argv, "prove")
    if head is None:
        return None
    verbose, rest = head
    paths, backend, no_verify = [], None, False
    rest = iter(rest)
    for arg in rest:
        if arg == "--no-verify":
            no_verify = True
        elif arg == "--backend" or arg.startswith("--backend="):
            backend = arg.partition("=")[2] if "=" in arg else next(rest, None)
            if backend not in PROVE_BACKENDS:
                return None
        elif arg.startswith("-"):
            return None
        else:
            paths.append(arg)
    if len(paths) != 4:
        return None
    # lazy: types is cheap but not always loaded at start-up
    from types import SimpleNamespace

    zkey, witness, proof, public = paths
    return SimpleNamespace(verbose=verbose, command="prove", zkey=zkey, witness=witness,
                           proof=proof, public=public, backend=backend, no_verify=no_verify,
                           **PROVE_DEFAULTS)


def _exit_at_once(code):
    """End the process without the interpreter's teardown, once the command has closed what
    it wrote: tearing down wasmtime-py's ctypes bindings costs ~40 ms, a tenth of a small
    circuit's ``cuzk-tasks witness``.  The standard streams and logging are flushed first."""
    # lazy: os is loaded at start-up anyway; logging was configured by main
    import logging
    import os

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(code)


def plain_witness_args(argv):
    """The arguments of a plain ``witness`` command line, parsed without argparse, or None.

    Plain: ``[-v|--verbose] witness`` and three paths that do not start with ``-``.  Anything
    else is None and argparse parses it, as for :func:`plain_prove_args`: importing argparse
    and building the parser cost ~25 ms, a tenth of a small circuit's witness command.
    tests/test_layering.py checks that both parsers agree.
    """
    head = _plain_head(argv, "witness")
    if head is None:
        return None
    verbose, paths = head
    if len(paths) != 3 or any(p.startswith("-") for p in paths):
        return None
    # lazy: types is cheap but not always loaded at start-up
    from types import SimpleNamespace

    wasm, input_json, witness = paths
    return SimpleNamespace(verbose=verbose, command="witness", wasm=wasm, input=input_json,
                           witness=witness, **WITNESS_DEFAULTS)


def main(argv=None):
    """Run the command of ``argv`` (default: the process's arguments) and return its exit
    status; run as the program (``argv`` None), a command marked ``exit_at_once`` (witness)
    ends the process itself (:func:`_exit_at_once`)."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    args = (plain_prove_args(argv) or plain_witness_args(argv)
            or build_parser(only=command_named(argv)).parse_args(argv))
    if getattr(args, "configure_logging", True):
        _configure_logging(args.verbose)
    code = _run(args)
    if program and getattr(args, "exit_at_once", False):
        _exit_at_once(code)
    return code


def _run(args):
    try:
        return args.func(args)
    except CuzkError as exc:
        print(f"cuzk-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"cuzk-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print(f"cuzk-tasks {args.command}: error: out of memory", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"cuzk-tasks {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
