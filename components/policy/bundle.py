"""A self-contained policy pack directory: what ``pulumi preview/up --policy-pack`` and ``pulumi policy publish`` take.

A pack directory is uploaded or run on its own, so it must hold everything its entry point imports. The
bundle lays out the rules, their pulumi-policy wrappers and the contract they read under the same package
paths as in this repository (``components/...``), next to an entry point at its root; Python puts the
entry point's directory on ``sys.path`` itself, so nothing is patched and nothing is copied by hand — the
files are this checkout's own. ``requirements.txt`` pins pulumi-policy at the locked version.

Built from a trusted checkout (the base branch, the operator's), a bundle also means the program being
checked cannot weaken the rules it is checked against.
"""

from __future__ import annotations

import hashlib
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Final

import yaml

REPO_ROOT: Final = Path(__file__).resolve().parents[2]

# The modules the pack imports, as paths relative to the repository root (and to the bundle's root).
PACK_MODULES: Final = (
    "components/__init__.py",
    "runtime/protocol/contract.py",
    "runtime/manifests/gpu_options.py",
    "runtime/manifests/dask_operator.py",
    "components/rendered.py",
    "components/policy/__init__.py",
    "components/policy/rules.py",
    "components/policy/pack.py",
)
ENTRY_POINT: Final = '''"""GPU Runtime policy pack, written by `gpurt policy bundle` (rules in components/policy)."""

from pulumi_policy import EnforcementLevel, PolicyPack

from components.policy.pack import PACK_NAME, build_policies

PolicyPack(name=PACK_NAME, policies=build_policies(), enforcement_level=EnforcementLevel.MANDATORY)
'''
TEMPLATE: Final = "components/policy/PulumiPolicy.yaml"
# Where Pulumi creates the pack's virtualenv from requirements.txt when none is given (publish, Pulumi Cloud).
DEFAULT_VIRTUALENV: Final = "venv"


class BundleError(ValueError):
    """The bundle cannot be written (the target exists and is not a bundle, a module is missing)."""


def write_bundle(out: Path, root: Path = REPO_ROOT, virtualenv: str = DEFAULT_VIRTUALENV) -> Path:
    """Write the pack to ``out`` (replacing an earlier bundle there) from the checkout at ``root``.

    ``virtualenv`` is the pack's Python environment: a path to one that has pulumi-policy (this project's
    ``.venv``) to run it at once, or the default, which Pulumi creates from ``requirements.txt``.
    """
    if out.exists():
        if not (out / "PulumiPolicy.yaml").is_file():
            raise BundleError(f"{out} exists and is not a policy pack bundle; choose an empty or new directory")
        shutil.rmtree(out)
    for module in PACK_MODULES:
        source = root / module
        if not source.is_file():
            raise BundleError(f"{source} is missing: is {root} a GPU Runtime checkout?")
        (out / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, out / module)
    (out / "__main__.py").write_text(ENTRY_POINT, encoding="utf-8")
    (out / "requirements.txt").write_text(f"pulumi-policy=={version('pulumi-policy')}\n", encoding="utf-8")
    project = yaml.safe_load((root / TEMPLATE).read_text())
    project["runtime"] = {"name": "python", "options": {"virtualenv": virtualenv}}
    project["version"] = f"{project['version']}-g{_digest(out)}"
    (out / "PulumiPolicy.yaml").write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")
    return out


def _digest(bundle: Path) -> str:
    """12 hex digits of the SHA-256 of the pack's code and pins: equal bundles, equal versions."""
    digest = hashlib.sha256()
    for path in (*PACK_MODULES, "__main__.py", "requirements.txt"):
        digest.update(path.encode() + b"\0" + (bundle / path).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def bundle_version(bundle: Path) -> str:
    """The version a bundle publishes as: the template's, with the digest of its code (``0.1.0-g1a2b3c4d5e6f``).

    Pulumi Cloud refuses a second publish of one version, and the server-side gate must run exactly the rules
    of the checkout that enabled it: a version per content gives both, and an unchanged pack is never
    published twice.
    """
    return str(yaml.safe_load((bundle / "PulumiPolicy.yaml").read_text())["version"])
