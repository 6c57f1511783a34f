"""``RecordingPulumiCli``: a stand-in for the ``pulumi`` executable, for tests only.

The Pulumi CLI cannot be installed on this project's machines, yet ``pulumi.automation`` works by running
it. This writes a small executable named ``pulumi`` that records every invocation (argv, cwd, imported
files) and answers from real-format fixtures (``tests/fixtures/pulumi``): ``stack history --json``,
``stack export [--version N]``, ``stack import``, ``stack output --json``, ``up`` and ``refresh``. So the
real automation code (argument building, JSON parsing) runs end to end; only the CLI is replaced.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pulumi"
CLI_VERSION = "v3.140.0"

_SCRIPT = r'''#!{python}
import json, os, shutil, subprocess, sys, time
STATE = {state!r}
# automation puts global flags first (--non-interactive); the command words follow
argv = [a for a in sys.argv[1:] if a != "--non-interactive"]
def load(name):
    with open(os.path.join(STATE, name)) as f:
        return json.load(f)
def save(name, value):
    with open(os.path.join(STATE, name), "w") as f:
        json.dump(value, f, indent=2)
def flag(name):
    return argv[argv.index(name) + 1] if name in argv else None
call = {{"argv": argv, "cwd": os.getcwd()}}
if argv[:2] == ["stack", "import"]:
    with open(flag("--file")) as f:
        call["imported"] = json.load(f)
    save("current.json", call["imported"])
with open(os.path.join(STATE, "calls.jsonl"), "a") as f:
    f.write(json.dumps(call) + "\n")
def add_history(kind):
    history = load("history.json")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    history.insert(0, {{"version": max(e["version"] for e in history) + 1, "kind": kind, "startTime": now,
                        "message": "", "environment": {{"git.head": head}} if head else {{}}, "config": {{}},
                        "result": os.environ.get("RECORDING_PULUMI_RESULT", "succeeded"), "endTime": now}})
    save("history.json", history)
if argv[:1] == ["version"]:
    print({version!r})
elif argv[:2] == ["stack", "history"]:
    history = load("history.json")
    print(json.dumps(history[:1] if flag("--page-size") == "1" else history))
elif argv[:2] == ["stack", "export"]:
    version = flag("--version")
    name = f"export-v{{version}}.json" if version else "current.json"
    if not os.path.exists(os.path.join(STATE, name)):
        sys.stderr.write(f"error: no checkpoint for version {{version}}\n")
        sys.exit(255)
    print(json.dumps(load(name)))
elif argv[:2] == ["stack", "output"]:
    print(json.dumps(load("outputs.json")))
elif argv[:1] in (["up"], ["refresh"]):
    print(f"{{argv[0].capitalize()}} of stack {{flag('--stack')}}: done")
    add_history("update" if argv[0] == "up" else "refresh")
    if os.environ.get("RECORDING_PULUMI_RESULT", "succeeded") != "succeeded":
        sys.stderr.write("error: update failed\n")
        sys.exit(255)
'''


class RecordingPulumiCli:
    """A fake ``pulumi`` in ``<root>/bin`` over a state folder seeded from the fixtures."""

    def __init__(self, root: Path, history: list[dict[str, Any]] | None = None) -> None:
        self.root = root
        self.state = root / "state"
        self.state.mkdir(parents=True)
        (self.state / "history.json").write_text(
            json.dumps(history) if history is not None else (FIXTURES / "stack_history.json").read_text())
        shutil.copy(FIXTURES / "stack_export_current.json", self.state / "current.json")
        shutil.copy(FIXTURES / "stack_export_v5.json", self.state / "export-v5.json")
        shutil.copy(FIXTURES / "stack_outputs.json", self.state / "outputs.json")
        binary = root / "bin" / "pulumi"
        binary.parent.mkdir()
        binary.write_text(_SCRIPT.format(python=sys.executable, state=str(self.state), version=CLI_VERSION))
        binary.chmod(0o755)

    @property
    def bin_dir(self) -> Path:
        """Put this first on PATH so ``pulumi.automation`` finds the stand-in."""
        return self.root / "bin"

    def calls(self) -> list[dict[str, Any]]:
        """Every recorded invocation, in order."""
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def commands(self) -> list[str]:
        """The first two words of each invocation (``stack export``, ``up --yes``…)."""
        return [" ".join(c["argv"][:2]) for c in self.calls()]

    def current_state(self) -> dict[str, Any]:
        """The state the stand-in holds now (after imports)."""
        return json.loads((self.state / "current.json").read_text())
