"""``gpurt rollback`` and ``gpurt state backup|restore|repair`` (docs/rollback.md)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from gpurt.cli.common import console, err_console
from gpurt.cli.stacks import STACK_HELP, BackupDirOption, StackOption, WorkDirOption, YesOption, handled, open_stack
from validation.state.backups import DEFAULT_BACKUP_DIR

if TYPE_CHECKING:
    from validation.adapters.pulumi_stack import PulumiStack
    from validation.rollback.plan import RollbackPlan

state_app = typer.Typer(help="Pulumi state: back up, restore a checkpoint, repair pending operations.",
                        no_args_is_help=True)
RefreshOption = Annotated[bool, typer.Option("--refresh/--no-refresh", help="Refresh against the cloud after.")]


@handled
def rollback(
    stack: Annotated[str | None, typer.Option("--stack", "-s", help=STACK_HELP)] = None,
    to: Annotated[int | None, typer.Option("--to", help="Stack version (or, with --kubernetes, revision).")] = None,
    since: Annotated[int | None, typer.Option(
        "--since", help="The stack's newest history version before a deploy: undo only an update newer than it, "
        "back to what ran then; with none, change nothing and exit 0 (the deploy workflow records it).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would happen; change nothing.")] = False,
    yes: YesOption = False,
    kubernetes: Annotated[bool, typer.Option("--kubernetes", help="Undo the gpu-scheduler rollout instead.")] = False,
    kube_context: Annotated[str | None, typer.Option("--kube-context", help="kubeconfig context.")] = None,
    work_dir: WorkDirOption = Path("."),
    backup_dir: BackupDirOption = DEFAULT_BACKUP_DIR,
) -> None:
    """Redeploy the last good update (its git commit and config), then validate; or undo a rollout."""
    if kubernetes:
        _kubernetes_undo(to, dry_run, yes, kube_context)
        return
    if stack is None:
        raise typer.BadParameter("--stack is required (or use --kubernetes)", param_hint="--stack")
    from validation.rollback.plan import NothingToUndo, choose_target

    current_stack = open_stack(stack, work_dir)
    try:
        plan = choose_target(current_stack.history(), to, since=since)
    except NothingToUndo as exc:
        console.print(f"nothing rolled back: {exc}")
        return
    _show_plan(plan)
    if dry_run:
        console.print(f"[yellow]dry run[/]: would back up the state, check out {plan.commit[:12]} into a temporary "
                      f"worktree, set its config, run pulumi up on stack {stack} with this checkout's policy pack, "
                      f"then gpurt validate --stack {stack}")
        return
    if not yes:
        typer.confirm(f"Roll stack {stack} back to version {plan.target.version}?", abort=True)
    from components.policy.bundle import write_bundle
    from validation.rollback.execute import execute

    with tempfile.TemporaryDirectory(prefix="gpurt-policy-") as tmp:
        # The operator's checkout holds the rules; the pack runs in this very environment (it has pulumi-policy).
        pack = write_bundle(Path(tmp) / "policy", root=work_dir.resolve(), virtualenv=sys.prefix)
        outcome = execute(plan, current_stack, work_dir.resolve(), lambda program: open_stack(stack, program),
                          backup_dir, validate=lambda: _validate_stack(stack, work_dir, kube_context),
                          policy_pack=pack,
                          on_output=lambda line: err_console.print(line, end="", markup=False, highlight=False))
    console.print(f"state backup: {outcome.backup}")
    console.print(f"pulumi up: {outcome.up_result}; validation {'passed' if outcome.validated else 'FAILED'}")
    if not outcome.validated:
        raise typer.Exit(1)


def _validate_stack(stack: str, work_dir: Path, kube_context: str | None) -> bool:
    from gpurt.cli.render import print_validation
    from validation.build import cloud_target
    from validation.runner import run_checks
    from validation.targets import cloud_checks

    report = run_checks(f"stack {stack}", cloud_checks(cloud_target(open_stack(stack, work_dir), kube_context)))
    print_validation(report, console)
    return report.ok


def _show_plan(plan: RollbackPlan) -> None:
    table = Table(title="rollback plan")
    for column in ("", "version", "result", "commit", "started", "message"):
        table.add_column(column)
    for label, entry in (("current", plan.current), ("target", plan.target)):
        table.add_row(label, str(entry.version), entry.result, (entry.commit or "-")[:12] + (" (dirty)" * entry.dirty),
                      entry.start_time.isoformat(timespec="seconds"), entry.message[:60])
    console.print(table)
    if not plan.config_changes:
        console.print("config: unchanged")
    for change in plan.config_changes:
        console.print(f"config {change.key}: {change.current!r} -> {change.target!r}")


def _kubernetes_undo(revision: int | None, dry_run: bool, yes: bool, kube_context: str | None) -> None:
    from validation.adapters.kube import api_client
    from validation.rollback.kubernetes import KubernetesDeploymentApi, undo

    api = KubernetesDeploymentApi(api_client(kube_context))
    plan = undo(api, revision, dry_run=True)
    console.print(f"gpu-scheduler: revision {plan.current_revision} -> {plan.target_revision} "
                  f"(images: {', '.join(plan.target_images)})")
    if dry_run:
        return
    if not yes:
        typer.confirm("Undo the gpu-scheduler rollout?", abort=True)
    with err_console.status("waiting for the rollout…"):
        undo(api, plan.target_revision)
    console.print(f"[green]rolled back[/] to revision {plan.target_revision}; every replica updated and available")


@state_app.command("backup")
@handled
def backup(stack: StackOption, work_dir: WorkDirOption = Path("."),
           backup_dir: BackupDirOption = DEFAULT_BACKUP_DIR) -> None:
    """Export the stack's state to <backup-dir>/<stack>-<UTC timestamp>.json."""
    from validation.state.backups import backup_stack

    console.print(f"backed up to {backup_stack(open_stack(stack, work_dir), backup_dir)}")


@state_app.command("restore")
@handled
def restore(
    stack: StackOption,
    version: Annotated[int | None, typer.Option("--version", help="History version to restore.")] = None,
    backend_url: Annotated[str | None, typer.Option("--backend-url", help="Self-managed backend "
                           "(file://, gs://, s3://); without it --version is read from Pulumi Cloud.")] = None,
    project: Annotated[str, typer.Option("--project", help="Pulumi project (self-managed history path).")]
    = "gpu-runtime",
    checkpoint: Annotated[str | None, typer.Option("--checkpoint", help="URL of one checkpoint file.")] = None,
    from_file: Annotated[Path | None, typer.Option("--file", help="A state export / backup file.")] = None,
    refresh: RefreshOption = True,
    yes: YesOption = False,
    work_dir: WorkDirOption = Path("."),
    backup_dir: BackupDirOption = DEFAULT_BACKUP_DIR,
) -> None:
    """Back up the current state, import an earlier checkpoint, refresh: for damaged state only.

    This changes what Pulumi believes, not the cloud: resources created after the checkpoint stay in GCP
    untracked, and the next `pulumi up` fails on their fixed names (409). To undo a change to the platform,
    use `gpurt rollback` (it redeploys the old program). See docs/rollback.md.
    """
    from validation.state import tools

    sources = [s for s in (version is not None and backend_url is None, backend_url, checkpoint, from_file) if s]
    if len(sources) != 1:
        raise typer.BadParameter("choose one source: --version N (Pulumi Cloud), --backend-url URL --version N, "
                                 "--checkpoint URL or --file PATH")
    target = open_stack(stack, work_dir)
    deployment, source = _load_deployment(target, version, backend_url, project, checkpoint, from_file)
    resources = len((deployment.get("deployment") or {}).get("resources") or [])
    console.print(f"restoring {source} ({resources} resources) into stack {stack}")
    if not yes:
        typer.confirm("Replace the stack's state (a backup is taken first)?", abort=True)
    change = tools.restore(target, deployment, source, backup_dir, refresh=refresh,
                           on_output=lambda line: err_console.print(line, end="", markup=False, highlight=False))
    console.print(f"state backup: {change.backup}; imported {source}; refresh: {change.refresh_result or 'skipped'}")


def _load_deployment(stack: PulumiStack, version: int | None, backend_url: str | None, project: str,
                     checkpoint: str | None, from_file: Path | None) -> tuple[dict[str, Any], str]:
    from validation.state import checkpoints
    from validation.state.backups import read_backup

    if from_file is not None:
        return read_backup(from_file), str(from_file)
    if checkpoint is not None:
        return checkpoints.rewrap(checkpoints.read_checkpoint(checkpoint), checkpoint), checkpoint
    if backend_url is not None:
        refs = checkpoints.list_checkpoints(backend_url, project, stack.name.rsplit("/", 1)[-1])
        if version is None:
            raise typer.BadParameter(f"--version is required with --backend-url ({len(refs)} checkpoints, 1 = oldest)")
        ref = next((r for r in refs if r.version == version), None)
        if ref is None:
            raise checkpoints.CheckpointError(f"no checkpoint {version} under {backend_url} (have 1..{len(refs)})")
        return checkpoints.rewrap(checkpoints.read_checkpoint(ref.url), ref.url), ref.url
    return stack.export(version), f"version {version} (pulumi stack export --version {version})"


@state_app.command("repair")
@handled
def repair(stack: StackOption, refresh: RefreshOption = True, yes: YesOption = False,
           work_dir: WorkDirOption = Path("."), backup_dir: BackupDirOption = DEFAULT_BACKUP_DIR) -> None:
    """Clear pending operations left by an interrupted update (backup first), then refresh."""
    from validation.state import tools

    target = open_stack(stack, work_dir)
    pending = tools.pending_operations(target.export())
    if not pending:
        console.print("no pending operations: nothing to repair")
        return
    for operation in pending:
        console.print(f"pending: {operation}")
    if not yes:
        typer.confirm(f"Clear {len(pending)} pending operation(s)? Check those resources in the cloud first.",
                      abort=True)
    change = tools.repair(target, backup_dir, refresh=refresh,
                          on_output=lambda line: err_console.print(line, end="", markup=False, highlight=False))
    console.print(f"state backup: {change.backup}; cleared {len(change.cleared)}; "
                  f"refresh: {change.refresh_result or 'skipped'}")
