"""Validation results and their machine renderings: JSON, and JUnit XML for CI (``gpurt validate`` draws the table)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field


class Status(StrEnum):
    """Outcome of one check."""

    PASS = "pass"
    FAIL = "fail"
    """Broken: what the deploy changed does not work (the deploy workflow rolls back)."""
    NO_CAPACITY = "no-capacity"
    """Works, but a quota is below the stack's need: request it; nothing to roll back."""
    SKIP = "skip"


class Verdict(StrEnum):
    """A whole run's outcome, which decides the deploy workflow's rollback (``gpurt validate``'s exit status)."""

    OK = "ok"
    NO_CAPACITY = "no-capacity"
    BROKEN = "broken"


class CheckResult(BaseModel):
    """One check's outcome, with what it saw and, on failure, what to fix."""

    name: str
    status: Status
    evidence: str
    fix: str | None = Field(None, description="What an operator should change; set on failures.")
    duration_s: float = Field(ge=0.0)


class Report(BaseModel):
    """All checks of one validation run against one target (a stack or the local platform)."""

    target: str
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    results: list[CheckResult] = Field(default_factory=list)

    @property
    def failed(self) -> list[CheckResult]:
        """The failing checks."""
        return [r for r in self.results if r.status is Status.FAIL]

    @property
    def short(self) -> list[CheckResult]:
        """The checks that found a quota below the stack's need."""
        return [r for r in self.results if r.status is Status.NO_CAPACITY]

    @property
    def ok(self) -> bool:
        """True when no check failed or came up short (skips do not fail a run)."""
        return not self.failed and not self.short

    @property
    def verdict(self) -> Verdict:
        """Broken when any check failed; else no capacity when a quota is short; else ok."""
        return Verdict.BROKEN if self.failed else Verdict.NO_CAPACITY if self.short else Verdict.OK

    def result(self, name: str) -> CheckResult:
        """The result of the check called ``name``."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def to_json(self) -> str:
        """The report as JSON (a stable shape: target, started_at, ok, results[])."""
        return json.dumps({"ok": self.ok, "verdict": self.verdict.value, **self.model_dump(mode="json")}, indent=2)

    def to_junit(self) -> str:
        """The report as JUnit XML: one testcase per check, failures and skips marked."""
        suite = ET.Element(
            "testsuite",
            name=f"gpurt validate {self.target}",
            tests=str(len(self.results)),
            failures=str(len(self.failed) + len(self.short)),
            skipped=str(sum(r.status is Status.SKIP for r in self.results)),
            time=f"{sum(r.duration_s for r in self.results):.3f}",
            timestamp=self.started_at.isoformat(),
        )
        for result in self.results:
            case = ET.SubElement(suite, "testcase", classname=f"validate.{self.target}", name=result.name,
                                 time=f"{result.duration_s:.3f}")
            if result.status in (Status.FAIL, Status.NO_CAPACITY):
                failure = ET.SubElement(case, "failure", message=result.evidence, type=result.status.value)
                failure.text = f"{result.evidence}\nfix: {result.fix or 'see docs/validation.md'}"
            elif result.status is Status.SKIP:
                ET.SubElement(case, "skipped", message=result.evidence)
            ET.SubElement(case, "system-out").text = result.evidence
        suites = ET.Element("testsuites")
        suites.append(suite)
        ET.indent(suites)
        return ET.tostring(suites, encoding="unicode", xml_declaration=True)

    def write_junit(self, path: Path) -> None:
        """Write the JUnit XML report to ``path`` (parents created)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_junit())
