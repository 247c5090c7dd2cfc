"""The package build compiles the native core, and says clearly when it cannot."""

import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_missing_compiler_is_a_clear_install_error(tmp_path):
    env = dict(os.environ, CXX="/nonexistent/g++", CC="/nonexistent/gcc")
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    message = result.stdout + result.stderr
    assert "no C++ compiler found" in message and "apt-get install g++" in message
    assert not list(tmp_path.rglob("_native*.so"))


def test_installed_core_is_loadable_and_current():
    from cuzk_tasks.groth16.backends import native

    assert native.lib().cuzk_abi_version() == native.ABI_VERSION
