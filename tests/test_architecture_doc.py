"""docs/architecture.md shows the contract as it is: its tables equal ``runtime.protocol.contract``."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.protocol import contract

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _rows(doc: str, header: str) -> list[list[str]]:
    """Cells of the table whose header row starts with ``| header |``."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_contract_table_matches_the_module() -> None:
    rows = _rows(DOC.read_text(), "name")
    assert len(rows) >= 20
    for name, value, _why in rows:
        assert str(getattr(contract, name.strip("`"))) == value.strip("`"), name


def test_service_account_table_matches_the_module() -> None:
    rows = {account.strip("`"): roles for account, roles, _ in _rows(DOC.read_text(), "account")}
    assert set(rows) == {sa.account_id for sa in contract.SERVICE_ACCOUNTS}
    for sa in contract.SERVICE_ACCOUNTS:
        assert re.findall(r"`([^`]+)`", rows[sa.account_id]) == list(sa.roles)


def test_probe_message_is_the_contract_one() -> None:
    import json

    shown = re.search(r"publishing `(\{[^`]+\})`", DOC.read_text())
    assert shown and json.loads(shown.group(1)) == contract.PROBE_MESSAGE


def test_every_job_type_is_listed() -> None:
    from kernels.params import JobType

    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `type` |"))
    assert re.findall(r"`([a-z_]+)`", row.split("|")[2]) == [t.value for t in JobType]


def test_every_scoped_grant_is_described() -> None:
    text = DOC.read_text()
    for grant in contract.SCOPED_GRANTS:
        assert f"`{grant.role}`" in text, grant.role
