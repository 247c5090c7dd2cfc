"""Build the native CPU core (``cuzk_tasks._native``).

The core is plain C++ (headers shared with the CUDA kernels) exposing a C ABI
that :mod:`cuzk_tasks.groth16.backends.native` loads with ctypes.  It is packaged as a
CPython extension module only so that ``pip install .`` compiles it with the
interpreter's own toolchain settings; it has no Python-level API of its own.
"""
import glob
import os
import shutil
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join("cuzk_tasks", "native")


class BuildNativeCore(build_ext):
    """build_ext that fails with a clear message when no C++ compiler exists."""

    def build_extensions(self):
        compiler_cmd = (self.compiler.compiler_cxx or self.compiler.compiler or ["c++"])[0]
        if shutil.which(compiler_cmd) is None and shutil.which(os.environ.get("CXX", "")) is None:
            raise SystemExit(
                "cuzk-tasks: no C++ compiler found (looked for %r). The native proving core "
                "must be compiled at install time: install g++ (Debian: apt-get install g++) "
                "or set CXX, then run 'pip install .' again." % compiler_cmd
            )
        for ext in self.extensions:
            ext.extra_compile_args = list(ext.extra_compile_args or [])
            if self.compiler.compiler_type == "unix":
                ext.extra_compile_args += ["-std=c++17", "-O3", "-fno-strict-aliasing", "-pthread"]
                march = os.environ.get("CUZK_NATIVE_MARCH")
                if march:
                    ext.extra_compile_args.append("-march=" + march)
                ext.extra_link_args = list(ext.extra_link_args or []) + ["-pthread"]
        try:
            super().build_extensions()
        except Exception as exc:  # distutils raises CompileError/LinkError
            raise SystemExit(
                "cuzk-tasks: compiling the native proving core failed: %s\n"
                "A C++17 compiler (g++ >= 9 or clang >= 10) is required." % exc
            )


setup(
    ext_modules=[
        Extension(
            "cuzk_tasks._native",
            sources=[os.path.join(NATIVE, "src", "cpu_core.cpp")],
            include_dirs=[os.path.join(NATIVE, "include")],
            # Rebuild when a shared header changes, not only the .cpp.
            depends=sorted(glob.glob(os.path.join(NATIVE, "include", "cuzk", "*"))),
            language="c++",
        )
    ],
    cmdclass={"build_ext": BuildNativeCore},
)
