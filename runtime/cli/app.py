"""``gpurt``: the root command. Each package contributes its own commands through ``register``.

Command modules import their heavy dependencies (Pulumi, numba, Dask) inside the command functions, so
``gpurt --help`` stays fast and a command only pays for what it uses.
"""

from __future__ import annotations

import warnings

# google-api-core warns on every import that Python 3.11 support ends in 2027; an operator at a terminal
# cannot act on that, so it is kept out of every command's output.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\..*")

import typer  # noqa: E402

import components.cli  # noqa: E402
import kernels.cli  # noqa: E402
import runtime.cli.commands  # noqa: E402
import validation.cli  # noqa: E402

app = typer.Typer(
    name="gpurt",
    help="GPU Runtime: deploy, operate and run the GPU Monte Carlo risk platform.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
bench = typer.Typer(help="Benchmarks: figures are printed and can be written to BENCHMARKS.md.",
                    no_args_is_help=True)
app.add_typer(bench, name="bench")

for package_cli in (components.cli, kernels.cli, runtime.cli.commands, validation.cli):
    package_cli.register(app, bench)


def main() -> None:
    """Console-script entry point."""
    app()
