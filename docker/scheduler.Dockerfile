# syntax=docker/dockerfile:1.7
# gpu-scheduler image: core + [scheduler] from uv.lock, no kernels' compilers, no scipy, no GPU libraries. It runs
# two things: the gpu-scheduler (its default command; Pub/Sub consumer, HTTP API on 8080, Dask client), and the
# DaskCluster's Dask scheduler (`dask scheduler`, set as the command by runtime/manifests/dask.py), which
# needs only distributed from the same lock, so client, scheduler and workers share one Dask version.
# Build from the repository root (BuildKit reads scheduler.Dockerfile.dockerignore beside this file):
#   docker build -f docker/scheduler.Dockerfile -t REGION-docker.pkg.dev/PROJECT/gpu-runtime/gpu-scheduler:$GIT_SHA .

# ---- build: exactly what uv.lock pins for core + [scheduler]: no dev, gpu or ops packages ----------
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
# Dependencies first, so a code change does not rebuild this layer.
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra scheduler --no-install-project
COPY runtime/__init__.py ./runtime/__init__.py
COPY runtime/scheduler ./runtime/scheduler
COPY runtime/pubsub ./runtime/pubsub
COPY runtime/storage ./runtime/storage
COPY runtime/vertex ./runtime/vertex
COPY runtime/leases ./runtime/leases
COPY runtime/worker ./runtime/worker
COPY runtime/manifests ./runtime/manifests
COPY runtime/protocol ./runtime/protocol
COPY kernels ./kernels
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra scheduler --no-editable

# ---- runtime: the virtualenv alone, owned by root, run by an unprivileged user -------------------
FROM ${PYTHON_BASE}
RUN groupadd --gid 10001 gpurt \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gpurt
COPY --from=build /opt/gpurt /opt/gpurt
# Read-only root filesystem: nothing is written outside /tmp (mount an emptyDir there); results go to
# GPURT_RESULT_STORE (gs:// in the cloud). Caches that libraries would write are pointed at /tmp.
ENV PATH=/opt/gpurt/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    NUMBA_CACHE_DIR=/tmp/numba \
    GPURT_HOST=0.0.0.0 \
    GPURT_PORT=8080 \
    GPURT_PROBE_PORT=8081
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 8081
# On the probes' own port, which a flood of the API's connections cannot starve (docs/scheduler.md#probes).
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=2)"]
# A default command, not an entrypoint: the Dask scheduler's pod replaces it with `dask scheduler ...`.
CMD ["python", "-m", "runtime.scheduler"]
