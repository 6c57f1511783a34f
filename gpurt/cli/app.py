"""``gpurt``: the root command, and the one place where the CLI is put together.

The CLI lives in this package alone. It imports the project's packages (docs/architecture.md names them)
and none of them imports it back; each command module
imports its heavy dependencies (Pulumi, numba, Dask) inside the command functions, so ``gpurt --help``
stays fast and a command pays only for what it uses.
"""

from __future__ import annotations

import warnings

# google-api-core warns on every import that Python 3.11 support ends in 2027; an operator at a terminal
# cannot act on that, so it is kept out of every command's output.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\..*")

import typer  # noqa: E402

from gpurt.cli import (  # noqa: E402
    alerts,
    bootstrap,
    demo,
    deploy_window,
    dlq,
    drills,
    images,
    jobs,
    leader,
    local,
    ops,
    plan,
    rollback,
    run,
    validate,
)
from gpurt.cli.bench import bench_app  # noqa: E402

app = typer.Typer(
    name="gpurt",
    help="GPU Runtime: deploy, operate and run the GPU Monte Carlo risk platform.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Platform engineers: an empty project made ready, the Pulumi program, its policy, checks after a deploy, and
# the way back.
app.command("bootstrap")(bootstrap.bootstrap)
app.command("plan")(plan.plan)
app.add_typer(plan.policy_app, name="policy")
app.add_typer(images.images_app, name="images")
app.command("deploy-window")(deploy_window.deploy_window)
app.command("validate")(validate.validate)
app.command("rollback")(rollback.rollback)
app.add_typer(rollback.state_app, name="state")
# Risk users: jobs in this process or on a platform.
app.command("run")(run.run_command)
app.command("submit")(jobs.submit)
app.add_typer(jobs.jobs_app, name="jobs")
# On-call and anyone: the local platform, its controls and drills.
app.add_typer(local.local_app, name="local")
app.add_typer(ops.pools_app, name="pools")
app.add_typer(ops.maintenance_app, name="maintenance")
app.add_typer(dlq.dlq_app, name="dlq")
app.add_typer(alerts.alerts_app, name="alerts")
app.add_typer(leader.leader_app, name="leader")
app.add_typer(drills.drill_app, name="drill")
app.command("demo")(demo.demo)
app.add_typer(bench_app, name="bench")


def main() -> None:
    """Console-script entry point."""
    app()
