"""Commands this package adds to ``gpurt``."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add this package's commands to the root app and the ``bench`` group."""
