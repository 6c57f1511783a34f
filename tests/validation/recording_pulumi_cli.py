"""``RecordingPulumiCli``: a stand-in for the ``pulumi`` executable, for tests only.

The Pulumi CLI cannot be installed on this project's machines, yet ``pulumi.automation`` works by running
it. This writes a small executable named ``pulumi`` that records every invocation (argv, cwd, imported
files, the config an ``up`` ran with) and answers from real-format fixtures (``tests/fixtures/pulumi``):
``stack select``, ``stack history --json``, ``stack export [--version N]``, ``stack import``,
``stack output --json``, ``config set-all``, ``up``, ``preview`` and ``refresh``. So the real automation code
(argument building, JSON parsing) runs end to end; only the CLI is replaced, and it refuses what the real one
refuses for the rules the project relies on (``tests/validation/fake_pulumi.py``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "pulumi"
REPO = Path(__file__).resolve().parents[2]
# The CLI the workflows pin (at the locked SDK's version): `config set-all --json` is there.
CLI_VERSION = "v3.272.0"
# The organization the fixtures' stack lives in, and the caller's default organization unless a test says
# otherwise (a bare stack name resolves against the latter: tests/validation/fake_pulumi.py).
ORG = "impulse"
STACK = f"{ORG}/gpu-runtime/staging"

_SCRIPT = """#!{python}
import sys
sys.path.insert(0, {repo!r})
from tests.validation.fake_pulumi import main
main({state!r})
"""


class RecordingPulumiCli:
    """A fake ``pulumi`` in ``<root>/bin`` over a state folder seeded from the fixtures.

    ``stacks``: the fully qualified stacks that exist; ``default_org``: the caller's default organization.
    """

    def __init__(self, root: Path, history: list[dict[str, Any]] | None = None, *,
                 stacks: tuple[str, ...] = (STACK,), default_org: str = ORG) -> None:
        self.root = root
        self.state = root / "state"
        self.state.mkdir(parents=True)
        (self.state / "cli.json").write_text(json.dumps({"version": CLI_VERSION, "default_org": default_org}))
        (self.state / "stacks.json").write_text(json.dumps(list(stacks)))
        (self.state / "history.json").write_text(
            json.dumps(history) if history is not None else (FIXTURES / "stack_history.json").read_text())
        shutil.copy(FIXTURES / "stack_export_current.json", self.state / "current.json")
        shutil.copy(FIXTURES / "stack_export_v5.json", self.state / "export-v5.json")
        shutil.copy(FIXTURES / "stack_outputs.json", self.state / "outputs.json")
        binary = root / "bin" / "pulumi"
        binary.parent.mkdir()
        binary.write_text(_SCRIPT.format(python=sys.executable, repo=str(REPO), state=str(self.state)))
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

    def stacks(self) -> list[str]:
        """The fully qualified stacks that exist now."""
        return json.loads((self.state / "stacks.json").read_text())

    def current_state(self) -> dict[str, Any]:
        """The state the stand-in holds now (after imports)."""
        return json.loads((self.state / "current.json").read_text())
