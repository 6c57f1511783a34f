"""Runs checks one after another, timing each and turning every outcome into a ``CheckResult``.

A check is a plain function returning its evidence on success. It raises ``CheckFailed`` (with the fix),
``NoCapacity`` (the platform works but a quota is below what it needs: request it, nothing to undo) or
``CheckSkipped`` (with the reason); any other exception is a failure too, reported with its message,
so one broken client never hides the results of the other checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from validation.report import CheckResult, Report, Status


class CheckFailed(Exception):
    """The platform does not match the contract; ``fix`` says what to change."""

    def __init__(self, evidence: str, fix: str) -> None:
        super().__init__(evidence)
        self.evidence = evidence
        self.fix = fix


class NoCapacity(CheckFailed):
    """The platform works, but a quota is below what it needs at its maxima: not broken, so nothing is rolled
    back; ``fix`` names the quota to request and how."""


class CheckSkipped(Exception):
    """The check does not apply to this target; the message says why."""


@dataclass(frozen=True)
class Check:
    """A named check; ``run`` returns the evidence it passed on."""

    name: str
    run: Callable[[], str]


def run_check(check: Check) -> CheckResult:
    """Run one check and time it."""
    start = time.monotonic()
    try:
        evidence, status, fix = check.run(), Status.PASS, None
    except NoCapacity as exc:
        evidence, status, fix = exc.evidence, Status.NO_CAPACITY, exc.fix
    except CheckFailed as exc:
        evidence, status, fix = exc.evidence, Status.FAIL, exc.fix
    except CheckSkipped as exc:
        evidence, status, fix = str(exc), Status.SKIP, None
    except Exception as exc:  # a crashing client is a failed check, not a crashed run
        evidence = f"{type(exc).__name__}: {exc}"
        status, fix = Status.FAIL, f"the check could not run ({evidence}); check credentials and connectivity"
    return CheckResult(name=check.name, status=status, evidence=evidence, fix=fix,
                       duration_s=time.monotonic() - start)


def run_checks(target: str, checks: Iterable[Check],
               on_result: Callable[[CheckResult], None] | None = None) -> Report:
    """Run ``checks`` in order against ``target``; ``on_result`` sees each result as it lands."""
    report = Report(target=target)
    for check in checks:
        result = run_check(check)
        report.results.append(result)
        if on_result is not None:
            on_result(result)
    return report


def skip(reason: str) -> Callable[[], str]:
    """A check body that always skips with ``reason`` (cloud-only checks on the local platform)."""

    def _run() -> str:
        raise CheckSkipped(reason)

    return _run
