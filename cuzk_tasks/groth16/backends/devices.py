"""Is there an NVIDIA driver on this host at all?  A check cheap enough for every start.

``--backend auto`` (the default of the CLI and of device workers) asks it before importing
the GPU backend: without a driver node there can be no CUDA device, and importing CuPy (and
the backend with it, ~0.1 s and tens of MB) would only slow down every start on CPU hosts.
"""

import os

#: device nodes an NVIDIA driver creates: Linux (/dev/nvidiactl, /proc/driver/nvidia), WSL2
DRIVER_NODES = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")


def nvidia_driver_present() -> bool:
    return any(os.path.exists(node) for node in DRIVER_NODES)
