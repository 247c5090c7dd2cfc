"""The docs' mechanical claims, kept true of the code.

* Every ``CUZK_*`` environment variable the code reads (cuzk_tasks/ with its web app, ops/*.py,
  and ``getenv`` in the native sources) is documented in cuzk_tasks/settings/defaults.py next to a
  constant that holds its default.
* Every key builder of ``cuzk_tasks.state.keys.Keys`` has a docstring that says the key's
  Redis type and what it holds (keys.py is the keyspace's reference); every key
  docs/architecture.md names is one a builder makes; its "Redis keyspace" section points to
  keys.py and names the Celery/kombu keys outside the prefix.
* Every ``cuzk-tasks`` subcommand appears in README.md or docs/, and in architecture.md's
  command list (``cuzk-tasks {prove | verify | ...}``).
* Every event type a Lua transition emits is in docs/api.md's SSE type list.
* docs/client.md's ``cuzk.status`` names every public status field (``reads.PUBLIC_JOB_FIELDS``,
  ``PUBLIC_PARTITION_FIELDS``) and no private one; docs/api.md's ``/api/jobs/<id>`` example
  carries every field of that document.
* The runbook's systemd steps create the spool, results and input directories of
  ops/systemd/cuzk.env.example and install every file its circuit registry names.
* The runbook's "Scaling out" states the detection time of a lost host as it is: heartbeat
  TTL plus one sweep interval, with the defaults' numbers.

Each check is a function returning what is missing; the ``*_would_fail`` tests remove
one entry at a time from the docs and require the check to report it.
"""

from __future__ import annotations

import ast
import inspect
import os
import pathlib
import re
import shlex
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULTS = ROOT / "cuzk_tasks" / "settings" / "defaults.py"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
API = ROOT / "docs" / "api.md"
RUNBOOK = ROOT / "ops" / "runbook.md"
ENV_EXAMPLE = ROOT / "ops" / "systemd" / "cuzk.env.example"

ENV_NAME = re.compile(r"CUZK_[A-Z0-9_]*[A-Z0-9]")  # a trailing "_" is a prefix, not a variable
NATIVE_GETENV = re.compile(r"getenv\(\s*\"(CUZK_[A-Z0-9_]+)\"")


# --- CUZK_* variables -----------------------------------------------------------------

def _python_sources():
    files = [*(ROOT / "cuzk_tasks").rglob("*.py"),
             *(ROOT / "ops").glob("*.py")]
    return [f for f in files if f.resolve() != DEFAULTS]


def env_vars_in_code() -> dict[str, str]:
    """``{variable: a file that reads it}``: string constants that are exactly a CUZK_* name
    (``os.environ.get("X")``, ``env_str("X", ...)``, the settings tables), and ``getenv("X")``
    in the native C++/CUDA sources.  Text inside docstrings and messages never matches."""
    found = {}
    for path in _python_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and ENV_NAME.fullmatch(node.value):
                found.setdefault(node.value, str(path.relative_to(ROOT)))
    native = ROOT / "cuzk_tasks" / "native"
    for path in sorted(native.rglob("*")):
        if path.suffix in (".h", ".hpp", ".cuh", ".cu", ".cpp", ".c"):
            for name in NATIVE_GETENV.findall(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def documented_env_vars(defaults_source: str) -> set[str]:
    """CUZK_* names defaults.py documents WITH a default: in the docstring that follows a
    module-level constant, or in the value of a constant (``X_ENV = "CUZK_..."``)."""
    body = ast.parse(defaults_source).body
    names = set()
    for node, following in zip(body, body[1:] + [None]):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        for sub in ast.walk(node.value):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                names.update(ENV_NAME.findall(sub.value))
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) \
                and isinstance(following.value.value, str):
            names.update(ENV_NAME.findall(following.value.value))
    return names


def undocumented_env_vars(code_vars, defaults_source) -> set[str]:
    return set(code_vars) - documented_env_vars(defaults_source)


def test_every_env_var_the_code_reads_is_in_defaults_py():
    code = env_vars_in_code()
    # the scan sees the settings tables (config.py, web/config.py), direct reads and C++
    assert {"CUZK_REDIS_URL", "CUZK_DEFAULT_PRIORITY", "CUZK_WEB_TOKEN", "CUZK_WEB_LOGLEVEL",
            "CUZK_GPU_MSM_WINDOW", "CUZK_MSM_WINDOW"} <= set(code)
    missing = undocumented_env_vars(code, DEFAULTS.read_text(encoding="utf-8"))
    assert not missing, "read by the code but not documented with a default in " \
        "cuzk_tasks/settings/defaults.py: " + ", ".join(f"{v} ({code[v]})" for v in sorted(missing))


def test_env_var_check_would_fail_if_an_entry_were_removed():
    code = env_vars_in_code()
    source = DEFAULTS.read_text(encoding="utf-8")
    assert not undocumented_env_vars(code, source)
    for name in code:
        removed = re.sub(rf"\b{name}\b", "REMOVED", source)
        assert undocumented_env_vars(code, removed) == {name}, name
    # a name only in a comment (no constant holding its default) does not count
    assert "CUZK_NOT_A_SETTING" not in documented_env_vars(source + "\n# CUZK_NOT_A_SETTING\n")


# --- Redis keyspace ---------------------------------------------------------------------

def _section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:] if end < 0 else text[start:end]


#: a key builder's docstring: its Redis type first, then a colon and what the key holds
KEY_DOC = re.compile(r"(hash|set|zset|list|string|stream)\b[^:]{0,40}:\s*\S.{20,}", flags=re.S)


def key_docs() -> dict[str, str]:
    """``{Keys method: its docstring}`` (``""`` when it has none)."""
    from cuzk_tasks.state.keys import Keys

    return {name: inspect.getdoc(method) or ""
            for name, method in inspect.getmembers(Keys, inspect.isfunction)
            if not name.startswith("_")}


def undocumented_keys(docs) -> set[str]:
    """The builders whose docstring does not start with the key's type and say what it holds."""
    return {name for name, doc in docs.items() if not KEY_DOC.match(doc)}


def keys_named_in(text) -> list[str]:
    """Every ``{p}:...`` key a text names in backticks."""
    return re.findall(r"`(\{p\}:[^`\s]+)`", text)


def key_patterns() -> dict[str, re.Pattern]:
    """``{Keys method: regex of its key in the table's notation}``: each builder is called
    with marker arguments; the prefix becomes ``{p}`` and each argument a ``{name}``."""
    from cuzk_tasks.state.keys import Keys

    keys = Keys("PFXMARK")
    patterns = {}
    for name, method in inspect.getmembers(keys, inspect.ismethod):
        if name.startswith("_"):
            continue
        params = list(inspect.signature(method).parameters.values())
        args = []
        for i, param in enumerate(params):
            args.append(9_000_000 + i if param.annotation in (int, "int") else f"ARGMARK{i}X")
        key = method(*args)
        regex = re.escape(key).replace("PFXMARK", r"\{p\}")
        for arg in args:
            regex = regex.replace(re.escape(str(arg)), r"\{[a-z_]+\}")
        patterns[name] = re.compile(regex)
    return patterns


def unknown_keys(text) -> list[str]:
    """Keys the text names that no builder makes (a stale or misspelt name)."""
    patterns = key_patterns().values()
    return [key for key in keys_named_in(text) if not any(p.fullmatch(key) for p in patterns)]


def outside_prefix_keys() -> list[str]:
    """What Celery's Redis result backend and kombu's Redis transport name, as the libraries
    define them (so a rename upstream shows up here)."""
    from celery.backends.redis import RedisBackend
    from kombu.transport.redis import Channel

    return [RedisBackend.task_keyprefix.rstrip("-"), Channel.unacked_key,
            Channel.unacked_index_key, Channel.unacked_mutex_key,
            Channel.keyprefix_queue.split("%")[0]]


def test_every_key_builder_documents_its_key():
    docs = key_docs()
    assert len(docs) >= 15 and set(docs) == set(key_patterns())
    missing = undocumented_keys(docs)
    assert not missing, "Keys methods whose docstring does not say the key's Redis type and " \
        f"contents (cuzk_tasks/state/keys.py): {sorted(missing)}"


def test_keys_named_in_architecture_exist():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(keys_named_in(text)) >= 5
    unknown = unknown_keys(text)
    assert not unknown, f"docs/architecture.md names keys no Keys method builds: {unknown}"


def test_keyspace_section_points_to_keys_py():
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Redis keyspace")
    assert "cuzk_tasks/state/keys.py" in section


def test_keys_outside_the_prefix_are_named():
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "## Redis keyspace")
    missing = [k for k in outside_prefix_keys() if f"`{k}" not in section]
    assert not missing, f"docs/architecture.md, Redis keyspace: keys outside the prefix not named: {missing}"


def test_keyspace_checks_would_fail_if_a_docstring_or_key_were_wrong():
    docs = key_docs()
    for name, doc in docs.items():
        assert name in undocumented_keys({**docs, name: ""}), name
        untyped = re.sub(r"^\w+", "value", doc)  # no Redis type first
        assert name in undocumented_keys({**docs, name: untyped}), name
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for key in keys_named_in(text):
        wrong = text.replace(f"`{key}`", f"`{key}x`", 1)
        assert f"{key}x" in unknown_keys(wrong), key


# --- CLI subcommands --------------------------------------------------------------------

def subcommands() -> list[str]:
    import argparse

    from cuzk_tasks.cli import build_parser

    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return sorted(actions[0].choices)


def _user_docs() -> str:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in paths)


def commands_missing_from_docs(text) -> list[str]:
    return [c for c in subcommands() if not re.search(rf"cuzk-tasks (?:-v )?{c}\b", text)]


ARCH_CLI_LINE = re.compile(r"`cuzk-tasks \{([^}`]*)\}`", flags=re.S)


def architecture_command_list(text) -> set[str]:
    """The commands of the ``cuzk-tasks {prove | verify | ...}`` list in "Layers"."""
    m = ARCH_CLI_LINE.search(text)
    assert m, "docs/architecture.md: no `cuzk-tasks {prove | ...}` command list in Layers"
    return {w.strip() for w in m.group(1).split("|")}


def test_every_cli_subcommand_is_documented():
    assert {"prove", "worker", "web", "demo"} <= set(subcommands())
    missing = commands_missing_from_docs(_user_docs())
    assert not missing, f"cuzk-tasks subcommands not shown in README.md or docs/: {missing}"
    listed = architecture_command_list(ARCHITECTURE.read_text(encoding="utf-8"))
    assert set(subcommands()) <= listed, \
        f"docs/architecture.md, cli.py line, misses {sorted(set(subcommands()) - listed)}"


def test_cli_check_would_fail_if_a_command_were_removed():
    text = _user_docs()
    arch = ARCHITECTURE.read_text(encoding="utf-8")
    for command in subcommands():
        removed = re.sub(rf"cuzk-tasks (-v )?{command}\b", "cuzk-tasks REMOVED", text)
        assert command in commands_missing_from_docs(removed), command
        region = ARCH_CLI_LINE.search(arch).group(1)
        arch_removed = arch.replace(region, re.sub(rf"\b{command}\b", "REMOVED", region))
        assert command not in architecture_command_list(arch_removed), command


# --- SSE event types ----------------------------------------------------------------------

def emitted_event_types() -> set[str]:
    """Literal event types of ``emit('type', ...)`` in the Lua transitions (types built at run
    time, ``'job_' .. state``, are listed in the doc by hand)."""
    scripts = ROOT / "cuzk_tasks" / "state" / "scripts"
    types = set()
    for path in scripts.glob("*.lua"):
        types.update(re.findall(r"emit\('([a-z_]+)'\s*,", path.read_text(encoding="utf-8")))
    return types - {"type"}  # the prelude's usage comment


def sse_types_missing(api_text) -> set[str]:
    m = re.search(r"`type` is the transition:(.*?)\);", api_text, flags=re.S)
    assert m, "docs/api.md: no SSE transition type list"
    listed = {w.strip() for w in m.group(1).replace("\n", " ").split(",")}
    return emitted_event_types() - listed


def test_every_event_type_is_in_the_sse_list():
    assert {"prove_fault", "route", "synth_end"} <= emitted_event_types()
    missing = sse_types_missing(API.read_text(encoding="utf-8"))
    assert not missing, f"docs/api.md, /api/events: transition types not listed: {sorted(missing)}"


def test_sse_check_would_fail_if_a_type_were_removed():
    text = API.read_text(encoding="utf-8")
    for name in emitted_event_types():
        assert name in sse_types_missing(re.sub(rf"\b{name}\b", "removed", text)), name


# --- the public status document (issue 48) -----------------------------------------------

CLIENT_DOC = ROOT / "docs" / "client.md"


def status_fields_missing(client_text) -> set[str]:
    """The public status fields docs/client.md's ``cuzk.status`` item does not name, plus
    any private partition field it does name."""
    from cuzk_tasks.state import reads

    m = re.search(r"^\* `cuzk\.status`(.*?)^\* ", client_text, flags=re.S | re.M)
    assert m, "docs/client.md: no cuzk.status item"
    named = set(re.findall(r"`([a-z_]+)`", m.group(1)))
    public = set(reads.PUBLIC_JOB_FIELDS) | set(reads.PUBLIC_PARTITION_FIELDS)
    return (public - named) | (set(reads.PRIVATE_PARTITION_FIELDS) & named)


def test_the_status_fields_are_documented():
    missing = status_fields_missing(CLIENT_DOC.read_text(encoding="utf-8"))
    assert not missing, f"docs/client.md, cuzk.status: fields not named (or private): {missing}"


def test_status_fields_check_would_fail_if_a_field_were_removed():
    from cuzk_tasks.state import reads

    text = CLIENT_DOC.read_text(encoding="utf-8")
    for name in reads.PUBLIC_JOB_FIELDS + reads.PUBLIC_PARTITION_FIELDS:
        assert name in status_fields_missing(text.replace(f"`{name}`", "removed")), name


def test_the_job_document_example_has_every_field():
    pytest.importorskip("flask")
    pytest.importorskip("prometheus_client")
    from cuzk_tasks.web.api import JOB_FIELDS, JOB_PARTITION_FIELDS

    m = re.search(r"## `GET /api/jobs/<id>`\s*```json(.*?)```", API.read_text(encoding="utf-8"),
                  flags=re.S)
    assert m, "docs/api.md: no /api/jobs/<id> example"
    keys = set(re.findall(r'"([a-z_]+)":', m.group(1)))
    missing = set(JOB_FIELDS + JOB_PARTITION_FIELDS) - keys
    assert not missing, f"docs/api.md, /api/jobs/<id>: fields not in the example: {missing}"


# --- runbook: systemd install steps -------------------------------------------------------

def _env_example():
    values = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def _systemd_block(runbook_text):
    section = _section(runbook_text, "## Hosts without Docker (systemd)")
    m = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert m, "ops/runbook.md: no sh block under 'Hosts without Docker'"
    return m.group(1)


def _installs(block):
    """(directories made by ``install -d``, {destination file: source}) of the block."""
    dirs, files = set(), {}
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("install "):
            continue
        words = shlex.split(line)[1:]
        operands, skip = [], False
        for word in words:
            if skip:
                skip = False
            elif word in ("-o", "-g", "-m"):
                skip = True
            elif not word.startswith("-"):
                operands.append(word)
        if "-d" in words:
            dirs.update(operands)
        else:
            *sources, dest = operands
            for source in sources:
                files[dest.rstrip("/") + "/" + os.path.basename(source) if dest.endswith("/")
                      else dest] = source
    return dirs, files


def systemd_steps_problems(runbook_text) -> list[str]:
    env = _env_example()
    dirs, files = _installs(_systemd_block(runbook_text))
    wanted = [("CUZK_SPOOL_DIR", env.get("CUZK_SPOOL_DIR")),
              ("CUZK_RESULTS_DIR", env.get("CUZK_RESULTS_DIR"))]
    wanted += [("CUZK_ALLOWED_INPUT_ROOTS", root)
               for root in env.get("CUZK_ALLOWED_INPUT_ROOTS", "").split(":") if root]
    problems = [f"{var}={path} is not created (install -d)" for var, path in wanted
                if path not in dirs]
    config = env["CUZK_CONFIG"]
    if config not in files:
        return problems + [f"CUZK_CONFIG={config} is not installed"]
    registry = tomllib.loads((ROOT / files[config]).read_text(encoding="utf-8"))
    for name, circuit in registry.get("circuits", {}).items():
        for field in ("zkey", "wasm"):
            if field not in circuit:
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(config), circuit[field]))
            source = files.get(path)
            if source is None:
                problems.append(f"circuits.{name}.{field} -> {path} is not installed")
            elif not (ROOT / source).is_file():
                problems.append(f"{path}: its source {source} does not exist")
            elif os.path.dirname(path) != os.path.dirname(config) and \
                    os.path.dirname(path) not in dirs:
                problems.append(f"{os.path.dirname(path)} is not created (install -d)")
    return problems


def test_runbook_systemd_steps_make_the_directories_and_circuits():
    problems = systemd_steps_problems(RUNBOOK.read_text(encoding="utf-8"))
    assert not problems, "ops/runbook.md, Hosts without Docker: " + "; ".join(problems)


def test_systemd_check_would_fail_if_a_step_were_removed():
    text = RUNBOOK.read_text(encoding="utf-8")
    block = _systemd_block(text)
    steps = [line for line in block.splitlines()
             if line.startswith("install ") and ("cuzk_tasks/data" in line or "/srv/" in line
                                                 or "cuzk.toml" in line)]
    assert len(steps) >= 4
    for step in steps:
        assert systemd_steps_problems(text.replace(step + "\n", "")), step


@pytest.mark.parametrize("var", ["CUZK_SPOOL_DIR", "CUZK_RESULTS_DIR", "CUZK_CONFIG"])
def test_env_example_sets_what_the_steps_rely_on(var):
    assert _env_example().get(var, "").startswith("/"), var


# --- runbook: detection time of a lost host ----------------------------------------------

def detection_time_problems(runbook_text) -> list[str]:
    """What "Scaling out" gets wrong about how long a lost host's partitions wait: the
    heartbeat TTL and the sweep interval (the heartbeat interval) with their defaults, and
    their sum as the bound."""
    from cuzk_tasks.settings import defaults

    section = " ".join(_section(runbook_text, "## Scaling out").split())
    ttl, sweep = defaults.HEARTBEAT_TTL_S, defaults.HEARTBEAT_INTERVAL_S
    want = [f"`CUZK_HEARTBEAT_TTL_S` ({ttl:g} s)", f"`CUZK_HEARTBEAT_INTERVAL_S` ({sweep:g} s)",
            f"up to {ttl + sweep:g} s after the loss"]
    return [w for w in want if w not in section]


def test_runbook_states_the_detection_time_of_a_lost_host():
    problems = detection_time_problems(RUNBOOK.read_text(encoding="utf-8"))
    assert not problems, "ops/runbook.md, Scaling out: missing " + "; ".join(problems)


def test_detection_time_check_would_fail_if_the_bound_were_wrong():
    from cuzk_tasks.settings import defaults

    text = RUNBOOK.read_text(encoding="utf-8")
    ttl, sweep = defaults.HEARTBEAT_TTL_S, defaults.HEARTBEAT_INTERVAL_S
    assert detection_time_problems(text.replace(f"up to {ttl + sweep:g} s after the loss",
                                                f"up to {ttl:g} s after the loss"))
