"""Commands the runtime package adds to ``gpurt``: the local platform, jobs, on-call controls, demo, bench.

Each group lives in its own module; heavy dependencies (Pub/Sub, Dask, matplotlib) are imported inside
the command functions so ``gpurt --help`` stays fast.
"""

from __future__ import annotations

import typer

from runtime.cli import bench as bench_commands
from runtime.cli import bench_emulator, bench_scaling
from runtime.cli import demo as demo_commands
from runtime.cli.alerts import alerts_app
from runtime.cli.dlq import dlq_app
from runtime.cli.jobs import jobs_app, submit
from runtime.cli.local import local_app
from runtime.cli.ops import maintenance_app, pools_app


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add this package's commands to the root app and the ``bench`` group."""
    app.add_typer(local_app, name="local")
    app.command("submit")(submit)
    app.add_typer(jobs_app, name="jobs")
    app.add_typer(pools_app, name="pools")
    app.add_typer(maintenance_app, name="maintenance")
    app.add_typer(dlq_app, name="dlq")
    app.add_typer(alerts_app, name="alerts")
    app.command("demo")(demo_commands.demo)
    bench.command("runtime")(bench_commands.bench_runtime)
    bench.command("emulator")(bench_emulator.bench_emulator)
    bench.command("scaling")(bench_scaling.bench_scaling)
