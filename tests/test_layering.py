"""cuzk_tasks.groth16 is a pure proving library: it must not depend on Celery or Redis."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
GROTH16 = ROOT / "cuzk_tasks" / "groth16"
FORBIDDEN = {"celery", "redis", "kombu", "flask"}


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


def test_state_store_wire_and_web_app_do_not_load_celery():
    """The state store, the message builder it is handed messages from, and the web app
    (which reads through the store) never need Celery or kombu."""
    code = (
        "import sys, cuzk_tasks.state, cuzk_tasks.wire, webapp, webapp.status\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('celery', 'kombu'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_function_of_the_web_app_is_longer_than_sixty_lines():
    """The status page is small modules and blueprints (issue 14): a view that grows past
    60 lines is split, not nested."""
    import ast

    long = []
    for path in sorted((ROOT / "webapp").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long
