"""What the pictures and the option tables read of a job's outcome: a ``Protocol`` that ``Result`` satisfies.

``Result`` draws itself (``Result.plot()``) and prices its options (``Result.implied_vols()``) with
``plots``, ``options`` and ``volatility``; those take a ``ResultView`` declared here, below them, instead of
importing ``Result``, so ``results`` is the top of that small graph and no import runs back up to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kernels.params import JobParams
from runtime.protocol.messages import JobResult, JobStatus

if TYPE_CHECKING:
    import pandas as pd


class ResultView(Protocol):
    """One job's outcome as ``gpurt.client.results.Result`` shows it: the fields a picture or a table reads."""

    @property
    def raw(self) -> JobResult:
        """The protocol's ``JobResult``."""
        ...

    @property
    def job_id(self) -> str:
        """The job's id."""
        ...

    @property
    def status(self) -> JobStatus:
        """How the job ended."""
        ...

    @property
    def summary(self) -> dict[str, Any]:
        """Everything the kernel reported."""
        ...

    @property
    def params(self) -> dict[str, Any]:
        """The parameters the job ran with, defaults filled in."""
        ...

    @property
    def job(self) -> JobParams | None:
        """The parameters the job ran with, as its type's validated params model."""
        ...

    @property
    def estimate(self) -> float | None:
        """The price (or VaR, or mean), if the job has one."""
        ...

    def __getitem__(self, key: str) -> Any:
        """A summary field by name."""
        ...

    def loss_histogram(self) -> pd.DataFrame:
        """A VaR job's loss histogram."""
        ...
