# cuzk-tasks images.  Two targets:
#
#   docker build --target cpu -t cuzk-tasks:cpu .   # slim Python, CPU backend (default target)
#   docker build --target gpu -t cuzk-tasks:gpu .   # NVIDIA CUDA 12 runtime + cupy-cuda12x
#
# Both compile the native C++ core in a build stage and ship only the resulting
# virtual environment (no compiler in the runtime image), run as the unprivileged
# user `cuzk` (uid 10001), and carry a HEALTHCHECK (ops/healthcheck.py: the web
# app's /healthz for `web`, the worker's own Redis heartbeat for `worker`).
#
# Expected sizes (ESTIMATES, not measured -- no Docker engine was available when
# this file was written): cpu ~300 MB uncompressed (python:3.11-slim ~130 MB +
# numpy/wasmtime/celery ~150 MB + core and circuit ~5 MB); gpu ~3.5-4 GB (the CUDA
# runtime base ~2.6 GB + cupy-cuda12x ~500 MB + the same Python stack).
#
# Versions are pinned: base images by tag (pin by digest in your registry mirror for
# bit-for-bit rebuilds), Python packages by ops/constraints.txt.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:12.6.3-runtime-ubuntu24.04

# -------- cpu: build stage (compiler lives only here) --------------------------------
FROM ${PYTHON_IMAGE} AS build-cpu
# x86-64 baseline by default so the image runs on any host; e.g. x86-64-v3 for AVX2 hosts
ARG CUZK_NATIVE_MARCH=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CUZK_NATIVE_MARCH=${CUZK_NATIVE_MARCH}
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY ops/constraints.txt /src/ops/constraints.txt
COPY pyproject.toml setup.py README.md /src/
COPY cuzk_tasks /src/cuzk_tasks
# PIP_CONSTRAINT (not -c) so the isolated build environment's setuptools is pinned too
RUN PIP_CONSTRAINT=/src/ops/constraints.txt pip install /src \
 && cd / && python -c "import cuzk_tasks._native, cuzk_tasks.web, gunicorn; from cuzk_tasks.groth16.backends.select import get_backend; get_backend('cpu')"

# -------- cpu: runtime -----------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS cpu
LABEL org.opencontainers.image.title="cuzk-tasks (cpu)" \
      org.opencontainers.image.description="Groth16 proving service on Celery + Redis, CPU backend"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CUZK_BACKEND=cpu \
    CUZK_CONFIG=/srv/circuits/cuzk.toml \
    CUZK_SPOOL_DIR=/srv/spool \
    CUZK_RESULTS_DIR=/srv/results \
    CUZK_WASM_CACHE_DIR=/srv/wasm-cache \
    CUZK_STAGE_KEY_FILE=/srv/keys/stage.key
# /srv/wasm-cache: compiled circuit wasm (groth16/wasm_cache.py), the container's own; it must
# belong to the user that runs cuzk-tasks and be writable by it alone (0700).  /srv/keys: the
# stage key that seals stage messages (cuzk_tasks/service/seal.py), made by the first worker;
# compose mounts one `keys` volume there in every worker, so all share it
# circom's C++ witness generators (witness = "native:...", docs/native-witness.md) need only
# libgmp10 and libstdc++6 at run time: both already here (coreutils pre-depends on libgmp10,
# apt on libstdc++6), checked so that stays true; no build tools in the image
RUN ldconfig -p | grep -q 'libgmp\.so\.10 ' && ldconfig -p | grep -q 'libstdc++\.so\.6 ' \
 && groupadd --system --gid 10001 cuzk \
 && useradd --system --uid 10001 --gid cuzk --home-dir /opt/cuzk --shell /usr/sbin/nologin cuzk \
 && mkdir -p /srv/circuits /srv/spool /srv/results /srv/wasm-cache /srv/keys /opt/cuzk/circuits \
 && chown cuzk:cuzk /srv/circuits /srv/spool /srv/results /srv/wasm-cache /srv/keys \
 && chmod 0700 /srv/wasm-cache /srv/keys
COPY --from=build-cpu /opt/venv /opt/venv
# the sample circuit and its registry entry; the circuits-init service copies them into
# the `circuits` volume (cuzk-circuits-init: never overwrites what an operator put there,
# but registers the sample in an operator's cuzk.toml that lacks it)
COPY cuzk_tasks/data/mulchain_1k /opt/cuzk/circuits/mulchain_1k
COPY ops/compose/cuzk.toml /opt/cuzk/circuits/cuzk.toml
COPY ops/compose/circuits-init.py /usr/local/bin/cuzk-circuits-init
COPY ops/healthcheck.py /usr/local/bin/cuzk-healthcheck
WORKDIR /opt/cuzk
USER cuzk
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/usr/local/bin/cuzk-healthcheck"]
ENTRYPOINT ["cuzk-tasks"]
CMD ["worker", "--cpu"]

# -------- gpu: build stage ------------------------------------------------------------
# Same CUDA base as the runtime so the venv's interpreter path (/usr/bin/python3.12,
# Ubuntu 24.04) matches; the native core is CPU code, so no nvcc is needed here.
FROM ${CUDA_IMAGE} AS build-gpu
ARG CUZK_NATIVE_MARCH=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CUZK_NATIVE_MARCH=${CUZK_NATIVE_MARCH} \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ python3 python3-dev python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY ops/constraints.txt ops/constraints-gpu.txt /src/ops/
COPY pyproject.toml setup.py README.md /src/
COPY cuzk_tasks /src/cuzk_tasks
RUN cat /src/ops/constraints.txt /src/ops/constraints-gpu.txt > /tmp/constraints.txt \
 && PIP_CONSTRAINT=/tmp/constraints.txt pip install "/src[gpu]" \
 && cd / && python -c "import cuzk_tasks._native, cuzk_tasks.web, gunicorn, cupy"

# -------- gpu: runtime ------------------------------------------------------------------
FROM ${CUDA_IMAGE} AS gpu
LABEL org.opencontainers.image.title="cuzk-tasks (gpu)" \
      org.opencontainers.image.description="Groth16 proving service on Celery + Redis, CUDA backend"
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CUZK_BACKEND=gpu \
    CUZK_CONFIG=/srv/circuits/cuzk.toml \
    CUZK_SPOOL_DIR=/srv/spool \
    CUZK_RESULTS_DIR=/srv/results \
    CUZK_WASM_CACHE_DIR=/srv/wasm-cache \
    CUZK_STAGE_KEY_FILE=/srv/keys/stage.key \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# circom's C++ witness generators (witness = "native:...", docs/native-witness.md) need only
# libgmp10 and libstdc++6 at run time: both already here (coreutils pre-depends on libgmp10,
# apt on libstdc++6), checked so that stays true; no build tools in the image
RUN ldconfig -p | grep -q 'libgmp\.so\.10 ' && ldconfig -p | grep -q 'libstdc++\.so\.6 ' \
 && groupadd --system --gid 10001 cuzk \
 && useradd --system --uid 10001 --gid cuzk --home-dir /opt/cuzk --shell /usr/sbin/nologin cuzk \
 && mkdir -p /srv/circuits /srv/spool /srv/results /srv/wasm-cache /srv/keys /opt/cuzk/circuits \
 && chown cuzk:cuzk /srv/circuits /srv/spool /srv/results /srv/wasm-cache /srv/keys \
 && chmod 0700 /srv/wasm-cache /srv/keys
COPY --from=build-gpu /opt/venv /opt/venv
COPY cuzk_tasks/data/mulchain_1k /opt/cuzk/circuits/mulchain_1k
COPY ops/compose/cuzk.toml /opt/cuzk/circuits/cuzk.toml
COPY ops/compose/circuits-init.py /usr/local/bin/cuzk-circuits-init
COPY ops/healthcheck.py /usr/local/bin/cuzk-healthcheck
WORKDIR /opt/cuzk
USER cuzk
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/cuzk-healthcheck"]
ENTRYPOINT ["cuzk-tasks"]
CMD ["worker", "--device", "0", "--backend", "gpu"]

# `docker build .` without --target builds the last stage; make that the CPU image.
FROM cpu AS default
