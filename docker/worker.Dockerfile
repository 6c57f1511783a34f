# syntax=docker/dockerfile:1.7
# Dask GPU worker image: core + [gpu] from uv.lock (numba, numba-cuda, cupy and the CUDA 12 libraries the
# kernels use, as NVIDIA's wheels: cudart, NVRTC, libNVVM, nvJitLink) plus this project's kernels. It runs
# `dask worker` (the DaskCluster's worker groups) and Vertex AI custom jobs (runtime.worker.vertex_task).
# Build from the repository root (BuildKit reads worker.Dockerfile.dockerignore beside this file):
#   docker build -f docker/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/gpu-runtime/gpu-worker:$GIT_SHA .
#
# One CUDA stack: the toolkit libraries come only from the locked wheels (cuda-toolkit, nvidia-*-cu12), so
# the base is a plain Python image, not a CUDA or RAPIDS image with a second toolkit of its own. The driver
# (libcuda, nvidia-smi) is the node's: GKE's managed driver installation mounts it at /usr/local/nvidia.
# The same lock gives scheduler and workers the same dask/distributed, which Dask requires.

# ---- build ---------------------------------------------------------------------------------------------
# Base image pinned by digest (the multi-architecture index of python:3.11.14-slim-bookworm), so a rebuild
# gets the same bytes; bump deliberately: docker buildx imagetools inspect python:3.11.14-slim-bookworm
ARG PYTHON_BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_BASE} AS build
# uv from PyPI, pinned by version and wheel hash: the workflows' uv, verified before it runs.
RUN --mount=type=bind,source=docker/uv.requirements.txt,target=/tmp/uv.requirements.txt \
    pip install --no-cache-dir --require-hashes -r /tmp/uv.requirements.txt
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/gpurt
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra gpu --no-install-project
COPY runtime/__init__.py ./runtime/__init__.py
COPY runtime/worker ./runtime/worker
COPY runtime/protocol ./runtime/protocol
COPY kernels ./kernels
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra gpu --no-editable
# The CPU twins compiled once, here, into a numba cache each worker copies into its own as it starts
# (runtime/worker/kernel_cache.py): a worker then loads them in seconds instead of compiling them for a minute
# of CPU. Run outside /src, so the kernels compiled are the installed ones the workers import.
RUN cd / && /opt/gpurt/bin/python -m runtime.worker.kernel_cache build /opt/gpurt/kernel-cache

# ---- runtime: the virtualenv alone, run by an unprivileged user -----------------------------------------
FROM ${PYTHON_BASE}
RUN groupadd --gid 10001 gpurt \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gpurt
COPY --from=build /opt/gpurt /opt/gpurt
# numba's cache and matplotlib's config live on a writable /tmp, so the root filesystem can stay read-only;
# the warm-up copies the compiled CPU twins (GPURT_KERNEL_CACHE_SEED) there. CUDA kernels compile at start,
# for the node's GPU. The node's driver libraries are found on LD_LIBRARY_PATH.
ENV PATH=/opt/gpurt/bin:/usr/local/nvidia/bin:$PATH \
    LD_LIBRARY_PATH=/usr/local/nvidia/lib64 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    GPURT_KERNEL_CACHE_SEED=/opt/gpurt/kernel-cache \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
WORKDIR /tmp
# What the DaskCluster runs: `dask worker` (runtime/manifests/dask.py worker_command); the Dask operator
# supplies the scheduler address, --nthreads and --resources GPU=N as the container's arguments.
CMD ["dask", "worker"]
