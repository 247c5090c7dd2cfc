"""TEST ONLY: ``import cupy`` resolves here for processes started with this folder first on
PYTHONPATH (tests/test_gpu_emulated.py's pipeline test), giving them tests/support/cupy_emu.py --
the CUDA kernels compiled with g++ and run on the CPU.  Never on a production path."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))  # tests/

from support.cupy_emu import *  # noqa: E402,F401,F403
from support.cupy_emu import cuda  # noqa: E402,F401
