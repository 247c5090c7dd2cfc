"""The Docker engine that ``ops/ci/docker-setup.sh`` sets up (``.ci/run`` runs it before
pytest): found through the record it writes, or not there, and why."""

import os
import pathlib
import subprocess

STATE_DIR = pathlib.Path(os.environ.get("CUZK_DOCKER_STATE_DIR", "/var/tmp/cuzk-docker-ci"))
ENABLE = "run `ops/ci/docker-setup.sh` as root (.ci/run does) to enable the Docker tests"


def engine_setup():
    """``(record, None)`` with the setup script's record (docker binary, stand-in image
    names) when its engine answers and the stand-ins exist, else ``(None, why not)``."""
    path = STATE_DIR / "env"
    if not path.exists():
        return None, f"no Docker engine set up ({path} is missing): {ENABLE}"
    env = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    docker = env.get("DOCKER", "docker")
    info = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"],
                          capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return None, f"the Docker engine does not answer ({info.stderr.strip()[:200]}): {ENABLE}"
    for image in (env["PYTHON_IMAGE"], env["REDIS_IMAGE"]):
        if subprocess.run([docker, "image", "inspect", image], capture_output=True,
                          timeout=60).returncode != 0:
            return None, f"base-image stand-in {image} is missing: {ENABLE}"
    return env, None
