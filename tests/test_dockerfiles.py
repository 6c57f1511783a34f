"""The images' key properties, read from the Dockerfiles (no Docker engine here)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.protocol import contract

DOCKER_DIR = Path(__file__).resolve().parents[1] / "docker"
SECRET_NAMES = re.compile(r"(PASSWORD|SECRET|TOKEN|PRIVATE_KEY|CREDENTIALS|API_KEY)", re.IGNORECASE)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse(path: Path) -> list[Instruction]:
    """Instructions of a Dockerfile, continuation lines joined and comments dropped."""
    instructions, pending = [], ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pending += stripped.rstrip("\\").strip() + " "
        if not stripped.endswith("\\"):
            keyword, _, args = pending.strip().partition(" ")
            instructions.append(Instruction(keyword.upper(), args.strip()))
            pending = ""
    return instructions


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    start = max(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
    return instructions[start:]


def resolved_bases(instructions: list[Instruction]) -> list[str]:
    args = {}
    for ins in instructions:
        if ins.keyword == "ARG" and "=" in ins.args:
            name, _, value = ins.args.partition("=")
            args[name] = value
    bases = []
    for ins in instructions:
        if ins.keyword == "FROM":
            image = ins.args.split()[0]
            bases.append(re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), image))
    return bases


@pytest.fixture(params=["scheduler", "worker"])
def dockerfile(request: pytest.FixtureRequest) -> tuple[str, list[Instruction]]:
    return request.param, parse(DOCKER_DIR / f"{request.param}.Dockerfile")


def test_every_base_image_is_pinned_by_version_tag_and_digest(dockerfile: tuple[str, list[Instruction]]) -> None:
    _, instructions = dockerfile
    images = resolved_bases(instructions) + [
        ins.args.split()[0].removeprefix("--from=") for ins in instructions
        if ins.keyword == "COPY" and ins.args.startswith("--from=") and ":" in ins.args.split()[0]
    ]
    assert images
    for image in images:
        reference, _, digest = image.partition("@")
        name, _, tag = reference.rpartition(":")
        assert name and tag != "latest" and re.search(r"\d", tag), f"no version tag: {image}"
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), f"not pinned by digest: {image}"


def test_uv_is_installed_by_hash_at_the_workflows_version(dockerfile: tuple[str, list[Instruction]]) -> None:
    import yaml

    _, instructions = dockerfile
    requirements = (DOCKER_DIR / "uv.requirements.txt").read_text()
    [pin] = re.findall(r"^uv==(\S+) --hash=sha256:[0-9a-f]{64}$", requirements, re.MULTILINE)
    installs = [ins.args for ins in instructions if ins.keyword == "RUN" and "uv.requirements.txt" in ins.args]
    assert installs and all("--require-hashes" in args for args in installs)
    assert not any(ins.args.startswith("--from=ghcr.io/astral-sh/uv") for ins in instructions)  # one way in
    workflows = DOCKER_DIR.parent / ".github" / "workflows"
    versions = {path.name: yaml.safe_load(path.read_text())["env"]["UV_VERSION"] for path in workflows.glob("*.yml")}
    assert versions and set(versions.values()) == {pin}, versions


def test_final_stage_runs_as_unprivileged_numeric_user(dockerfile: tuple[str, list[Instruction]]) -> None:
    _, instructions = dockerfile
    users = [ins.args for ins in final_stage(instructions) if ins.keyword == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) >= 10000


def test_dependencies_come_from_the_lock_file(dockerfile: tuple[str, list[Instruction]]) -> None:
    name, instructions = dockerfile
    assert any(ins.keyword == "COPY" and "uv.lock" in ins.args.split() for ins in instructions)
    syncs = [ins.args for ins in instructions if ins.keyword == "RUN" and "uv sync" in ins.args]
    assert syncs and all("--frozen" in s and "--no-dev" in s for s in syncs)
    # Each image installs exactly its extra of pyproject.toml (tests/test_dependencies.py checks its code
    # needs nothing more): the scheduler never the GPU stack or the operator tools, the worker never the
    # scheduler's service libraries.
    extras = {frozenset(re.findall(r"--extra (\w+)", s)) for s in syncs}
    assert extras == {frozenset({"scheduler"} if name == "scheduler" else {"gpu"})}
    assert not any("--all-extras" in s for s in syncs)


def test_no_secrets_in_any_layer(dockerfile: tuple[str, list[Instruction]]) -> None:
    _, instructions = dockerfile
    for ins in instructions:
        if ins.keyword in {"ENV", "ARG", "LABEL"}:
            assert not SECRET_NAMES.search(ins.args), f"possible secret baked into the image: {ins}"
        if ins.keyword in {"COPY", "ADD"}:
            assert not re.search(r"\.(pem|key)\b|credentials|\.env\b|state\.json", ins.args), ins


def test_dockerignore_excludes_everything_not_copied(dockerfile: tuple[str, list[Instruction]]) -> None:
    name, _ = dockerfile
    rules = [line for line in (DOCKER_DIR / f"{name}.Dockerfile.dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules[0] == "**"  # deny by default: .venv, .git and .gpurt (tokens) never reach the context
    assert not any(rule.startswith("!.") for rule in rules)


def test_scheduler_image_serves_and_checks_health() -> None:
    instructions = parse(DOCKER_DIR / "scheduler.Dockerfile")
    final = final_stage(instructions)
    probes = f"127.0.0.1:{contract.SCHEDULER_PROBE_PORT}{contract.HEALTH_PATH}"  # outside the API's connection cap
    assert any(ins.keyword == "HEALTHCHECK" and probes in ins.args for ins in final)
    probe_port = f"GPURT_PROBE_PORT={contract.SCHEDULER_PROBE_PORT}"
    assert any(ins.keyword == "ENV" and probe_port in ins.args for ins in final)
    assert [ins.args for ins in final if ins.keyword in {"CMD", "ENTRYPOINT"}] == [
        '["python", "-m", "runtime.scheduler"]']  # a CMD: the Dask scheduler's pod replaces it
    assert "the gpu-scheduler (`python -m runtime.scheduler`, its default command" in (
        DOCKER_DIR / "README.md").read_text()
    assert all("slim" in base for base in resolved_bases(instructions))
    assert len(resolved_bases(instructions)) >= 2  # multi-stage: no build tools in the final image


def test_worker_image_has_one_cuda_stack() -> None:
    # The CUDA libraries come from the locked wheels only: a CUDA, RAPIDS or NGC base image would add a
    # second toolkit that the wheels' libraries could be mixed with at load time.
    instructions = parse(DOCKER_DIR / "worker.Dockerfile")
    bases = resolved_bases(instructions)
    assert bases and all(base.startswith("python:") and "slim" in base for base in bases)
    env = " ".join(ins.args for ins in final_stage(instructions) if ins.keyword == "ENV")
    assert "LD_LIBRARY_PATH=/usr/local/nvidia/lib64" in env  # the node's driver, mounted by GKE
    # The image says what it runs: the DaskCluster's own worker command (no unused dask-cuda-worker).
    from runtime.manifests.dask import worker_command

    [cmd] = [ins.args for ins in final_stage(instructions) if ins.keyword in {"CMD", "ENTRYPOINT"}]
    assert json.loads(cmd) == worker_command(1)[:2]


def test_every_python_m_command_in_the_docs_names_a_module_that_runs() -> None:
    """``python -m X`` in a document runs ``X``: a module, or a package with a ``__main__``."""
    root = DOCKER_DIR.parent
    documents = [root / "README.md", DOCKER_DIR / "README.md", *sorted((root / "docs").rglob("*.md"))]
    missing = [f"{doc.relative_to(root)}: python -m {module}"
               for doc in documents for module in re.findall(r"python -m ([A-Za-z_][\w.]*\w)", doc.read_text())
               if not _runnable(root, module)]
    assert missing == []


def _runnable(root: Path, module: str) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()
