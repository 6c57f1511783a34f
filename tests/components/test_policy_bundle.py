"""The policy pack bundle: self-contained (runs from its own directory, no path patching) and pinned."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from components.policy import rules
from components.policy.bundle import PACK_MODULES, BundleError, bundle_version, write_bundle

# Runs the bundle's entry point as Pulumi would (its directory first on sys.path), with PolicyPack recording
# what it is given instead of serving the engine.
_RUN_ENTRY_POINT = """
import json, runpy, sys
import pulumi_policy
seen = {}
class Recording:
    def __init__(self, name, policies, enforcement_level):
        seen.update(name=name, policies=[p.name for p in policies], level=str(enforcement_level))
pulumi_policy.PolicyPack = Recording
bundle = sys.argv[1]
sys.path.insert(0, bundle)
runpy.run_path(bundle + "/__main__.py", run_name="__main__")
import runtime.protocol.contract, components.policy.rules
seen["modules"] = [runtime.protocol.contract.__file__, components.policy.rules.__file__]
print(json.dumps(seen))
"""


def test_the_bundle_runs_from_its_own_files(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "pack")
    done = subprocess.run([sys.executable, "-c", _RUN_ENTRY_POINT, str(bundle)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["policies"] == [r.id for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)]
    assert "MANDATORY" in seen["level"]
    assert all(Path(module).is_relative_to(bundle) for module in seen["modules"])
    assert "sys.path" not in (bundle / "__main__.py").read_text()


def test_the_bundle_is_pinned_and_names_its_environment(tmp_path: Path) -> None:
    publishable = write_bundle(tmp_path / "publish")
    runnable = write_bundle(tmp_path / "run", virtualenv=sys.prefix)

    assert (publishable / "requirements.txt").read_text() == f"pulumi-policy=={version('pulumi-policy')}\n"
    assert yaml.safe_load((publishable / "PulumiPolicy.yaml").read_text())["runtime"]["options"] == {
        "virtualenv": "venv"}
    assert yaml.safe_load((runnable / "PulumiPolicy.yaml").read_text())["runtime"]["options"] == {
        "virtualenv": sys.prefix}
    assert sorted(str(p.relative_to(runnable)) for p in runnable.rglob("*.py")) == sorted(
        [*PACK_MODULES, "__main__.py"])


def test_a_bundle_replaces_an_older_bundle_but_never_another_directory(tmp_path: Path) -> None:
    write_bundle(tmp_path / "pack")
    (tmp_path / "pack" / "stale.py").write_text("")
    write_bundle(tmp_path / "pack")
    (tmp_path / "docs").mkdir()

    assert not (tmp_path / "pack" / "stale.py").exists()
    with pytest.raises(BundleError, match="is not a policy pack bundle"):
        write_bundle(tmp_path / "docs")


def test_the_version_follows_the_packs_code_not_where_it_runs(tmp_path: Path) -> None:
    publishable = bundle_version(write_bundle(tmp_path / "publish"))
    assert publishable == bundle_version(write_bundle(tmp_path / "run", virtualenv=sys.prefix))
    template = yaml.safe_load((Path(__file__).resolve().parents[2] / "components/policy/PulumiPolicy.yaml").read_text())
    assert publishable.startswith(f"{template['version']}-g")

    root = tmp_path / "checkout"  # the same checkout with one rule changed publishes as a new version
    for module in (*PACK_MODULES, "components/policy/PulumiPolicy.yaml"):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_bytes((Path(__file__).resolve().parents[2] / module).read_bytes())
    with (root / "components/policy/rules.py").open("a") as rules_file:
        rules_file.write("\n# changed\n")
    assert bundle_version(write_bundle(tmp_path / "changed", root=root)) != publishable
