# syntax=docker/dockerfile:1.7
# Dask GPU worker image: the RAPIDS stack (CUDA 12, dask-cuda, cupy, numba) plus this project's kernels.
# Build from the repository root (BuildKit reads worker.Dockerfile.dockerignore beside this file):
#   docker build -f runtime/docker/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/gpu-runtime/gpu-worker:$GIT_SHA .
#
# The project's locked packages, `gpu` extra included, go into a virtualenv layered over the RAPIDS
# Python (--system-site-packages). Dask refuses mismatched client and worker versions, so the worker
# must run exactly the dask/distributed that uv.lock gives the scheduler, not whatever RAPIDS ships.
ARG RAPIDS_IMAGE=nvcr.io/nvidia/rapidsai/base:25.10-cuda12-py3.11

FROM ${RAPIDS_IMAGE} AS build
USER root
COPY --from=ghcr.io/astral-sh/uv:0.13.8 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/gpurt
WORKDIR /src
RUN uv venv --python /opt/conda/bin/python --system-site-packages /opt/gpurt
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra gpu --no-install-project
COPY components ./components
COPY runtime ./runtime
COPY kernels ./kernels
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra gpu --no-editable

FROM ${RAPIDS_IMAGE}
USER root
RUN groupadd --gid 10001 gpurt \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gpurt
COPY --from=build /opt/gpurt /opt/gpurt
# Kernels compile at first use; numba's cache and matplotlib's config live on a writable /tmp, so the
# root filesystem can stay read-only.
ENV PATH=/opt/gpurt/bin:/opt/conda/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
WORKDIR /tmp
# The Dask operator supplies the worker's arguments (scheduler address, --resources GPU=1); the RAPIDS
# entrypoint, which installs extra packages at start as root, is deliberately not used.
ENTRYPOINT []
CMD ["dask-cuda-worker"]
