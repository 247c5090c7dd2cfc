"""One-way imports (issue 14): cuzk_tasks.groth16 is a pure proving library that never
depends on Celery or Redis; the state store, wire and the web app never load Celery; the
web app (cuzk_tasks.web) is a layer on top that reads the state store through its public
read API only, and only the commands that start it import it; no module imports another
that imports it back; and an import inside a function says why."""

import ast
import io
import os
import pathlib
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GROTH16 = ROOT / "cuzk_tasks" / "groth16"
FORBIDDEN = {"celery", "redis", "kombu", "flask"}
PACKAGES = ("cuzk_tasks",)


def test_no_forbidden_import_statements():
    offenders = []
    for path in GROTH16.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_the_library_loads_no_queue_or_store_module():
    code = (
        "import sys, pkgutil, importlib, cuzk_tasks.groth16 as g\n"
        "for m in pkgutil.walk_packages(g.__path__, 'cuzk_tasks.groth16.'):\n"
        "    if not m.name.endswith('.gpu'): importlib.import_module(m.name)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {sorted(FORBIDDEN)!r})\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_state_store_messages_and_web_app_do_not_load_celery():
    """The state store, the outbox entries it is handed (messages, queues), and the web app
    (which reads through the store) never need Celery or kombu."""
    code = (
        "import sys, cuzk_tasks.state, cuzk_tasks.service.messages, cuzk_tasks.service.queues, cuzk_tasks.web, "
        "cuzk_tasks.web.status\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('celery', 'kombu'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def loaded_by_import(module: str) -> list[str]:
    """Every module that ``import module`` loads in a fresh interpreter, beyond its start."""
    code = (f"import sys; before = set(sys.modules); import {module}\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_command_line_imports_only_what_a_command_runs():
    """``cuzk-tasks --help`` stays fast: the CLI module loads, of this project, the errors
    alone (argparse when it builds a parser); each command imports the rest when it runs."""
    ours = [m for m in loaded_by_import("cuzk_tasks.cli") if m.split(".")[0] in PACKAGES]
    assert ours == ["cuzk_tasks", "cuzk_tasks.cli", "cuzk_tasks.errors"]


def test_the_command_line_builds_the_parser_of_the_command_it_runs(capsys):
    """main builds only the named command's parser (the other ten cost ~15 ms of a small
    proof's run); COMMANDS is every command of the full parser, in its order."""
    from cuzk_tasks import cli

    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["no-such-command"])
    listed = capsys.readouterr().err.split("choose from ", 1)[1]
    assert tuple(name.strip(" '\n)") for name in listed.split(",")) == cli.COMMANDS
    args = cli.build_parser(only="prove").parse_args(["prove", "a", "b", "c", "d"])
    assert (args.command, args.zkey, args.public) == ("prove", "a", "d")
    with pytest.raises(SystemExit):  # the others are not there
        cli.build_parser(only="prove").parse_args(["vkey", "a", "b"])
    assert cli.command_named(["-v", "prove", "a.zkey"]) == "prove"
    assert cli.command_named(["--help"]) is None and cli.command_named(["nonsense"]) is None


PLAIN_PROVE_LINES = [
    ["prove", "a.zkey", "w.wtns", "p.json", "pub.json"],
    ["-v", "prove", "a.zkey", "w.wtns", "p.json", "pub.json"],
    ["--verbose", "-v", "prove", "a", "b", "c", "d", "--no-verify"],
    ["prove", "--backend", "cpu", "a", "b", "c", "d"],
    ["prove", "a", "--backend=gpu", "b", "c", "--no-verify", "d"],
    ["prove", "a", "b", "c", "d", "--backend", "auto", "--backend", "cpu"],
    ["prove", "a b", "./b", "c.json", "prove"],
]
NOT_PLAIN_LINES = [  # argparse parses these, or says what is wrong with them
    ["prove", "a", "b", "c"], ["prove", "a", "b", "c", "d", "e"], ["prove", "--help"],
    ["prove", "a", "b", "c", "d", "--backend", "tpu"], ["prove", "a", "b", "c", "d", "--backend"],
    ["prove", "a", "b", "c", "d", "-v"],
    ["vkey", "a", "b"],
    ["-h"], [], ["--verbose"], ["-x", "prove", "a", "b", "c", "d"],
]
VALID_BUT_NOT_PLAIN = [  # argparse takes these: an abbreviation, a path after --, "-"
    ["prove", "a", "b", "c", "d", "--no-ver", "--back", "cpu"],
    ["prove", "a", "b", "c", "--no-verify", "--", "-d"],
    ["prove", "-", "b", "c", "d", "--no-verify"],
]


PLAIN_WITNESS_LINES = [
    ["witness", "c.wasm", "in.json", "w.wtns"],
    ["-v", "witness", "c.wasm", "in.json", "w.wtns"],
    ["--verbose", "-v", "witness", "a b.wasm", "", "witness"],
]
NOT_PLAIN_WITNESS_LINES = [  # argparse parses these, or says what is wrong with them
    ["witness", "c.wasm", "in.json"], ["witness", "a", "b", "c", "d"], ["witness", "--help"],
    ["witness", "a", "b", "-"], ["witness", "a", "--", "b", "c"], ["-x", "witness", "a", "b", "c"],
    ["prove", "a", "b", "c"], [],
]


@pytest.mark.parametrize("argv", PLAIN_WITNESS_LINES)
def test_a_plain_witness_line_parses_as_argparse_parses_it(argv):
    """plain_witness_args (witness without argparse's ~25 ms) agrees with the parser."""
    from cuzk_tasks import cli

    assert vars(cli.plain_witness_args(argv)) == vars(cli.build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", NOT_PLAIN_WITNESS_LINES)
def test_any_other_witness_line_is_left_to_argparse(argv):
    from cuzk_tasks import cli

    assert cli.plain_witness_args(argv) is None


@pytest.mark.parametrize("argv", PLAIN_PROVE_LINES)
def test_a_plain_prove_line_parses_as_argparse_parses_it(argv):
    """plain_prove_args (prove without argparse's ~30 ms import) agrees with the parser."""
    from cuzk_tasks import cli

    assert vars(cli.plain_prove_args(argv)) == vars(cli.build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", NOT_PLAIN_LINES)
def test_any_other_line_is_left_to_argparse(argv, capsys):
    from cuzk_tasks import cli

    assert cli.plain_prove_args(argv) is None
    if argv[:1] == ["prove"] and "--help" not in argv:
        with pytest.raises(SystemExit) as info:  # each is a mistake argparse names
            cli.build_parser().parse_args(argv)
        assert info.value.code == 2 and "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", VALID_BUT_NOT_PLAIN)
def test_unusual_but_valid_lines_are_left_to_argparse_which_takes_them(argv):
    from cuzk_tasks import cli

    assert cli.plain_prove_args(argv) is None
    assert cli.build_parser().parse_args(argv).no_verify


def test_a_plain_prove_imports_neither_argparse_nor_json(tmp_path):
    """What ``cuzk-tasks prove`` loads beyond the interpreter's start, up to the native call
    (here the call declines at once: the files do not exist)."""
    code = ("import sys; before = set(sys.modules)\n"
            "from cuzk_tasks import cli; from cuzk_tasks.groth16.backends import native_prove\n"
            f"args = cli.plain_prove_args(['-v', 'prove', 'z', 'w', 'p', 'q'])\n"
            "assert args.command == 'prove' and args.verbose\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    loaded = {name.split(".")[0] for name in result.stdout.split()}
    assert not loaded & {"argparse", "json", "re", "shutil", "logging", "numpy", "importlib.util"}
    assert "ctypes" in loaded  # the check sees what native_prove loads


def test_the_witness_command_imports_no_numpy(tmp_path):
    """``cuzk-tasks witness`` (issue 25): wasmtime, json and the witness module, but neither
    numpy (~0.1-0.4 s of its start), the JSON shapes of proofs (jsonio, points) nor argparse
    (a plain command line: plain_witness_args)."""
    fixture = ROOT / "tests" / "fixtures" / "mulchain"
    out = tmp_path / "w.wtns"
    code = ("import sys; from cuzk_tasks import cli\n"
            f"assert cli.main(['witness', {str(fixture / 'circuit.wasm')!r}, "
            f"{str(fixture / 'input.json')!r}, {str(out)!r}]) == 0\n"
            "print(' '.join(sorted(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=dict(os.environ, CUZK_WASM_CACHE_DIR="off"))
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split())
    assert "wasmtime" in loaded and "cuzk_tasks.groth16.witness" in loaded  # it looked
    assert not {m for m in loaded if m.split(".")[0] == "numpy"}
    assert not loaded & {"cuzk_tasks.groth16.formats.jsonio", "cuzk_tasks.groth16.points",
                         "cuzk_tasks.groth16.formats.wtns", "cuzk_tasks.groth16.formats.zkey", "argparse"}
    assert out.read_bytes() == (fixture / "witness.wtns").read_bytes()


@pytest.mark.parametrize("module, absent", [
    # the stages import the compute (numpy, wasmtime) and redis-py or kombu when they run
    ("cuzk_tasks.pipeline", {"numpy", "wasmtime", "celery", "kombu", "redis"}),
    ("cuzk_tasks.client", {"numpy", "wasmtime"}),
])
def test_the_pipeline_and_the_client_load_no_compute(module, absent):
    """What the pipeline's lazy imports keep out of a client's process (and out of an import
    of the pipeline: Celery, kombu and redis-py come with an app or a connection)."""
    assert not sorted(m for m in loaded_by_import(module) if m.split(".")[0] in absent)


def test_no_function_of_the_web_app_is_longer_than_sixty_lines():
    """The status page is small modules and blueprints (issue 14): a view that grows past
    60 lines is split, not nested."""
    long = []
    for path in sorted((ROOT / "cuzk_tasks" / "web").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long



# --- the import graph ---------------------------------------------------------------------

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def module_files() -> dict[str, pathlib.Path]:
    """Every module of the packages by dotted name (``cuzk_tasks/web/gunicorn.conf.py`` is
    ``cuzk_tasks.web.gunicorn.conf``: gunicorn reads it as a file, nothing imports it)."""
    files = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def from_import_base(module: str, path: pathlib.Path, node: ast.ImportFrom) -> str:
    """The absolute module name ``from X import ...`` in ``module`` (file ``path``) names."""
    base = node.module or ""
    if node.level:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return base


def imported_modules(module: str, path: pathlib.Path, known) -> set[str]:
    """The modules of ``known`` that ``module`` imports, at module level or in a function.
    ``from pkg import name`` names the submodule ``pkg.name`` when there is one (an edge to
    it, not to the package's __init__), else ``pkg``; a name outside ``known`` is the
    nearest known package above it."""
    def nearest(name):
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(nearest(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = from_import_base(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else nearest(base))
    found.discard("")
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imported_modules(name, path, files) for name, path in files.items()}


def import_cycles(graph) -> set[tuple[str, ...]]:
    """Every elementary cycle of ``graph``, each as a tuple starting at its smallest name."""
    cycles = set()
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    cycles.add(tuple(trail))
                elif nxt > start and nxt not in trail:
                    stack.append((nxt, trail + [nxt]))
    return cycles


#: Cycles inside cuzk_tasks/groth16/ that stand for now (the lead removes them, and then
#: this list): the GPU backend is chosen by backends.select.get_backend, and gpu.py proves with
#: prover.prove_start, which asks backends for its backend.  Every other cycle fails.
GROTH16_CYCLES_ALLOWED = set()


def test_import_graph_has_no_cycles():
    """No module imports (at module level or in a function) one that imports it back."""
    cycles = import_cycles(import_graph())
    for cycle in GROTH16_CYCLES_ALLOWED:
        assert all(m.startswith("cuzk_tasks.groth16.") for m in cycle), cycle
    new = sorted(c for c in cycles if c not in GROTH16_CYCLES_ALLOWED)
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in new)
    gone = sorted(GROTH16_CYCLES_ALLOWED - cycles)
    assert not gone, f"no longer cycles, remove them from GROTH16_CYCLES_ALLOWED: {gone}"


def test_the_cycle_finder_sees_a_cycle_through_a_function_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == {("a", "b", "c")}
    known = module_files()
    edges = imported_modules("cuzk_tasks.celery_app", known["cuzk_tasks.celery_app"], known)
    assert "cuzk_tasks.service.tasks" in edges  # imported inside create_app


# --- the web app: a layer inside cuzk_tasks ----------------------------------------------

WEB = "cuzk_tasks.web"
#: Of the rest of cuzk_tasks the web app takes these names and no others (None: any name of
#: a module of plain values).  From the state store: its public read API -- the StateStore
#: (its methods: WEB_STORE_READS), the status reads of ``reads`` and the record decoding of
#: ``codec``; never ``keys``, ``store`` internals or the Lua scripts, which only the store
#: owns.  Besides: settings, errors, the Redis outage classification and the queue names
#: whose depths the status read sums.
WEB_MAY_TAKE = {
    "cuzk_tasks.state": {"StateStore"},
    "cuzk_tasks.state.reads": {"status_delta", "last_event_id", "phase_histograms",
                               "PUBLIC_JOB_FIELDS", "PUBLIC_PARTITION_FIELDS"},
    "cuzk_tasks.state.codec": {"decode"},
    "cuzk_tasks.service.queues": {"queue_keys"},
    "cuzk_tasks.settings.redis_url": {"is_outage", "outage_errors", "redact"},
    "cuzk_tasks.settings.config": {"load_settings", "stage_queue_of"},
    "cuzk_tasks.errors": {"ConfigError"},
    "cuzk_tasks.settings.defaults": None,
}
#: The StateStore methods the web app calls: reads, all of them (it writes nothing).
WEB_STORE_READS = {"from_url", "ping", "get_job", "job_status", "get_result", "collect_result",
                   "eta_errors",
                   "events"}
#: What reaches Redis beside the store's methods: the web app never touches any of it.
STORE_INSIDES = {"redis", "keys", "script", "common_args", "Keys"}
#: The modules outside the web app that import it, and what they import: the commands
#: that start it (``cuzk-tasks web``, ``cuzk-tasks demo``).  Nothing else depends on it.
WEB_STARTED_BY = {"cuzk_tasks.cli": {"cuzk_tasks.web.serve"},
                  "cuzk_tasks.dev.demo": {"cuzk_tasks.web.config", "cuzk_tasks.web.serve"}}


def in_web(module: str) -> bool:
    return module == WEB or module.startswith(WEB + ".")


def web_uses() -> tuple[dict[str, set[str]], set[str], set[str]]:
    """What the web app's modules use of the rest: ``({module of cuzk_tasks outside the web
    app: names taken from it}, {attributes used on a store}, {top-level packages imported})``.
    A name is taken by ``from m import name`` or as ``alias.name`` of a module imported as
    ``alias``; a store is ``store``, ``<x>.store`` or the class ``StateStore``."""
    known = module_files()
    taken, store_attrs, packages = {}, set(), set()
    for module, path in known.items():
        if not in_web(module):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    packages.add(alias.name.split(".")[0])
                    if alias.name in known and not in_web(alias.name):
                        taken.setdefault(alias.name, set()).add("*")  # the whole module
            elif isinstance(node, ast.ImportFrom):
                base = from_import_base(module, path, node)
                packages.add(base.split(".")[0])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in known:
                        aliases[alias.asname or alias.name] = sub
                    elif base in known and not in_web(base):
                        taken.setdefault(base, set()).add(alias.name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in aliases \
                    and not in_web(aliases[value.id]):
                taken.setdefault(aliases[value.id], set()).add(node.attr)
            if (isinstance(value, ast.Name) and value.id in ("store", "StateStore")) \
                    or (isinstance(value, ast.Attribute) and value.attr == "store"):
                store_attrs.add(node.attr)
        store_attrs |= {n.attr for n in ast.walk(tree)
                        if isinstance(n, ast.Attribute) and n.attr in STORE_INSIDES}
        store_attrs |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Keys"}
    return taken, store_attrs, packages


def test_the_web_app_reads_the_state_store_through_its_read_api_only():
    """cuzk_tasks/web/ shapes pages and documents out of what the store's read API returns;
    Redis keys, Lua scripts and redis-py stay behind the store (cuzk_tasks/state/)."""
    taken, store_attrs, packages = web_uses()
    assert "status_delta" in taken["cuzk_tasks.state.reads"] and "job_status" in store_attrs
    wrong = {m: sorted(names - WEB_MAY_TAKE[m]) if m in WEB_MAY_TAKE else sorted(names)
             for m, names in taken.items()
             if m not in WEB_MAY_TAKE or (WEB_MAY_TAKE[m] is not None and names - WEB_MAY_TAKE[m])}
    assert not wrong, f"the web app takes what the layer rule does not give it: {wrong}"
    assert store_attrs <= WEB_STORE_READS, sorted(store_attrs - WEB_STORE_READS)
    assert not packages & {"redis", "celery", "kombu"}, sorted(packages)


def test_only_the_commands_that_start_it_import_the_web_app():
    graph = import_graph()
    importers = {m: {t for t in targets if in_web(t)} for m, targets in graph.items()
                 if not in_web(m) and any(in_web(t) for t in targets)}
    assert set(importers) == set(WEB_STARTED_BY), importers
    for module, targets in importers.items():
        assert targets <= WEB_STARTED_BY[module], (module, targets)


# --- imports inside a function ------------------------------------------------------------

#: cuzk_tasks/groth16/ is left out for now (its lazy imports get their comments with the
#: lead's groth16 change; then this exclusion goes).
INNER_IMPORT_EXCLUDED = ()


def comment_lines(source: str) -> tuple[set[int], set[int]]:
    """(lines with a comment, lines that are only a comment)."""
    anywhere, alone = set(), set()
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            anywhere.add(row)
            if not lines[row - 1][:col].strip():
                alone.add(row)
    return anywhere, alone


def uncommented_function_imports(path: pathlib.Path) -> list[int]:
    """Lines of the imports inside a function of ``path`` with no comment on their own
    line(s) and none on the line above their block (imports one after the other, blank
    lines between them allowed: isort's groups)."""
    source = path.read_text(encoding="utf-8")
    anywhere, alone = comment_lines(source)
    bad = []

    def check(statements):
        block = []
        for stmt in statements + [None]:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                block.append(stmt)
                continue
            if block and block[0].lineno - 1 not in alone:
                bad.extend(n.lineno for n in block
                           if not anywhere & set(range(n.lineno, n.end_lineno + 1)))
            block = []

    def visit(node, in_function):
        in_function = in_function or isinstance(node, FUNCTIONS)
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                if in_function and value and isinstance(value[0], ast.stmt):
                    check(value)
                for child in value:
                    if isinstance(child, ast.AST):
                        visit(child, in_function)
            elif isinstance(value, ast.AST):
                visit(value, in_function)

    visit(ast.parse(source, filename=str(path)), False)
    return sorted(bad)


def test_every_import_inside_a_function_says_why():
    """An import inside a function has a comment on its line, or on the line above its
    block, saying why it is not at the top (what it keeps out of which process, or the
    cycle it breaks)."""
    bad = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(INNER_IMPORT_EXCLUDED):
                continue
            bad += [f"{rel}:{line}" for line in uncommented_function_imports(path)]
    assert not bad, "imports inside a function without a comment saying why: " + ", ".join(bad)


def test_the_inner_import_check_reads_blocks_and_comments(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import os\n"
        "def f():\n"
        "    # lazy: a reason\n"
        "    import a\n"
        "\n"
        "    from b import (c,\n"
        "                   d)\n"
        "    x = 1\n"
        "    import e\n"
        "    import g  # optional\n"
        "    if os:\n"
        "        import h\n"
        "    return a\n"
        "class K:\n"
        "    import i\n"
        "    def m(self):\n"
        "        import j\n")
    assert uncommented_function_imports(path) == [9, 12, 17]
