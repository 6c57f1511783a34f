"""`gpurt --help` stays fast: importing the CLI imports none of the heavy libraries its commands use.

Each command imports what it needs inside its function; a module-level import of the report code, Pulumi, the
kernels' compiler, Dask or the Google clients in any command module would be paid by every `gpurt` call.
Checked in a fresh interpreter, by what it imported, not by a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("matplotlib", "pulumi", "numba", "dask", "distributed", "google.cloud", "gpurt.demo.report", "scipy")


def test_importing_the_cli_imports_no_heavy_library() -> None:
    roots = sorted({heavy.split(".")[0] for heavy in HEAVY})
    probe = ("import json, sys; import gpurt.cli.app; "
             f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    loaded = set(json.loads(result.stdout))

    assert not {heavy for heavy in HEAVY if any(m == heavy or m.startswith(f"{heavy}.") for m in loaded)}, loaded


def test_help_lists_every_command_without_importing_them() -> None:
    probe = ("import sys\nfrom typer.testing import CliRunner\nfrom gpurt.cli.app import app\n"
             "result = CliRunner().invoke(app, ['--help'], env={'COLUMNS': '200'})\n"
             "assert result.exit_code == 0, result.output\n"
             "print('matplotlib' in sys.modules, 'pulumi' in sys.modules, result.output)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)

    assert result.stdout.startswith("False False")
    assert all(command in result.stdout for command in ("plan", "policy", "images", "validate", "demo", "bench"))
