"""Compute backends for the heavy part of proving: the native C++ core on the CPU
(:mod:`.native`, loaded by :mod:`.native_lib`; :mod:`.native_prove` is the whole-file prover
of ``cuzk-tasks prove``) and CUDA through CuPy (:mod:`.gpu`, kernels compiled by NVRTC from
the same headers); :mod:`.select` picks one.  Importing this package loads nothing, so the
command line's plain prove stays light."""
