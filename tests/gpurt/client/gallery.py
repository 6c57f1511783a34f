"""The pictures of docs/python-api.md, drawn the way the page says: ``python -m tests.gpurt.client.gallery``.

``JOBS`` is the page's code that describes the jobs, verbatim (``test_docs_pictures`` checks it); here the jobs
run on this machine's CPU through the kernels a worker runs (``kernel_results``) instead of on a platform, and
each picture is drawn by its line of ``PICTURES``, the call the page shows under it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import gpurt
from gpurt.client import Job, Result
from tests.gpurt.client.kernel_results import kernel_result

ROOT = Path(__file__).resolve().parents[3]
IMAGES = ROOT / "docs" / "images"
# Small PNGs: an 8 x 4.5 inch figure is 640 x 360 pixels.
DPI: Final = 80

JOBS: Final = '''\
call = EuropeanOption(strike=100, paths=50_000, greeks=["delta", "gamma", "vega"])
runs = [EuropeanOption(strike=100, paths=n, antithetic=False, control_variate=False)
        for n in (1_000, 4_000, 16_000, 64_000, 256_000)]
book = OptionBook([Contract(strike=k, maturity=1.0, kind="put" if k < 100 else "call") for k in range(70, 131, 10)],
                  model="heston", spot=100, rate=0.03, dividend_yield=0.01, initial_variance=0.04,
                  long_variance=0.05, mean_reversion=1.5, vol_of_vol=0.5, correlation=-0.7,
                  steps_per_year=32, paths=40_000, greeks=["delta", "vega"])
basket = Basket(spots=[100, 95, 105], weights=[1 / 3, 1 / 3, 1 / 3], volatilities=[0.2, 0.25, 0.3],
                correlation=[[1.0, 0.5, 0.3], [0.5, 1.0, 0.4], [0.3, 0.4, 1.0]], strike=100, paths=20_000,
                greeks=["delta", "vega", "rho"])
reports = [PortfolioVaR(exposures=[5e6, 3e6, 2e6], volatilities=[0.18, 0.25, 0.35],
                        correlation=[[1.0, 0.6, 0.4], [0.6, 1.0, 0.5], [0.4, 0.5, 1.0]],
                        confidence=0.99, revaluation="full", paths=100_000, horizon_days=days)
           for days in (1, 5, 10)]
'''
# Each picture's file under docs/images/ and the call that draws it, as the page shows them.
PICTURES: Final = {
    "price.png": "call.plot()",
    "convergence.png": "plot_results(runs)",
    "smile.png": "book.plot()",
    "book_prices.png": 'book.plot(kind="prices")',
    "greeks.png": 'basket.plot(kind="greeks")',
    "loss.png": "reports[-1].plot()",
    "var_by_horizon.png": "plot_results(reports)",
}


def results(store: Path) -> dict[str, Any]:
    """``JOBS``' names bound to their results (a list of results for a list of jobs), run on the CPU."""
    jobs: dict[str, Any] = {}
    exec(JOBS, {name: getattr(gpurt, name) for name in gpurt.__all__}, jobs)

    def run(name: str, job: Job) -> Result:
        return kernel_result(store, name, job.job_type.value, job.model_dump(mode="json"))

    return {name: [run(f"{name}-{i}", j) for i, j in enumerate(job)] if isinstance(job, list) else run(name, job)
            for name, job in jobs.items()}


def draw(folder: Path = IMAGES) -> list[Path]:
    """Every picture of ``PICTURES``, as PNG files in ``folder``."""
    import matplotlib

    matplotlib.use("Agg")  # files only, whatever display this machine has
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as store:
        namespace = {**results(Path(store)), "plot_results": gpurt.plot_results}
        for name, call in PICTURES.items():
            drawn = eval(call, namespace)
            figure = (drawn[0] if hasattr(drawn, "__len__") else drawn).figure
            figure.savefig(folder / name, dpi=DPI)
            plt.close(figure)
            written.append(folder / name)
    return written


if __name__ == "__main__":
    for path in draw(Path(sys.argv[1]) if len(sys.argv) > 1 else IMAGES):
        print(f"{path} ({path.stat().st_size // 1024} kB)")
