"""Books of options: every contract against its formula, on common random numbers, within the limits."""

from __future__ import annotations

import pytest

from kernels.closed_form import black_scholes
from kernels.heston_reference import HestonModel, heston_price
from kernels.params import MAX_BOOK_CONTRACTS
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw
from tests.kernels.test_greeks import black_scholes_greeks

CONTRACTS = [{"strike": 90.0, "maturity": 0.5}, {"strike": 100.0, "maturity": 1.0, "kind": "put"},
             {"strike": 110.0, "maturity": 0.25}, {"strike": 100.0, "maturity": 1.0}]
HESTON = {"initial_variance": 0.04, "long_variance": 0.05, "mean_reversion": 1.5, "vol_of_vol": 0.5,
          "correlation": -0.7}


def test_black_scholes_book_prices_and_greeks_match_the_formulas() -> None:
    greeks = ["delta", "gamma", "vega", "rho", "theta"]
    s = run_raw("option_book", {"contracts": CONTRACTS, "dividend_yield": 0.01, "steps_per_year": 4,
                                "paths": 100_000, "seed": 21, "greeks": greeks}, device="cpu").summary
    z = bonferroni_z(len(CONTRACTS) * (1 + len(greeks)))
    assert [(c["strike"], c["maturity"]) for c in s["contracts"]] == [(c["strike"], c["maturity"]) for c in CONTRACTS]
    for contract in s["contracts"]:
        call = contract["kind"] == "call"
        exact = black_scholes(100, contract["strike"], 0.05, 0.2, contract["maturity"], call, 0.01)
        assert contract["reference"] == pytest.approx(exact)
        assert abs(contract["estimate"] - exact) < z * contract["std_error"], (contract, exact)
        reference = black_scholes_greeks(100, contract["strike"], 0.05, 0.01, 0.2, contract["maturity"], call)
        for name, value in reference.items():
            greek = contract["greeks"][name]
            assert abs(greek["estimate"] - value) < z * greek["std_error"], (contract["strike"], name, greek, value)


def test_heston_book_matches_the_semi_analytic_prices() -> None:
    s = run_raw("option_book", {"contracts": CONTRACTS, "model": "heston", **HESTON, "rate": 0.03,
                                "steps_per_year": 128, "paths": 60_000, "seed": 4}, device="cpu").summary
    z = bonferroni_z(len(CONTRACTS))
    model = HestonModel(0.04, 0.05, 1.5, 0.5, -0.7)
    for contract in s["contracts"]:
        call = contract["kind"] == "call"
        exact = heston_price(100, contract["strike"], 0.03, 0.0, contract["maturity"], model, call)
        assert abs(contract["estimate"] - exact) < z * contract["std_error"], (contract, exact)


@pytest.mark.slow  # a Heston gamma at enough paths to meet the reference
def test_heston_book_gamma_at_nonzero_correlation() -> None:
    """Gamma's likelihood-ratio weight comes from both first-step shocks: checked away from the money."""
    contracts = [{"strike": 120.0, "maturity": 1.0}, {"strike": 85.0, "maturity": 0.5, "kind": "put"}]
    s = run_raw("option_book", {"contracts": contracts, "model": "heston", **HESTON, "rate": 0.03,
                                "steps_per_year": 64, "paths": 200_000, "seed": 12, "greeks": ["gamma"]},
                device="cpu").summary
    model = HestonModel(0.04, 0.05, 1.5, 0.5, -0.7)
    z, h = bonferroni_z(len(contracts)), 0.1
    for contract in s["contracts"]:
        call = contract["kind"] == "call"

        def price(spot: float, c: dict = contract, call: bool = call) -> float:
            return heston_price(spot, c["strike"], 0.03, 0.0, c["maturity"], model, call)

        exact = (price(100 + h) - 2 * price(100) + price(100 - h)) / h**2
        gamma = contract["greeks"]["gamma"]
        assert abs(gamma["estimate"] - exact) < z * gamma["std_error"], (contract["strike"], gamma, exact)


def test_contracts_share_their_paths() -> None:
    """Common random numbers: a contract prices the same alone as inside any book."""
    base = {"paths": 20_000, "seed": 3, "steps_per_year": 8}
    book = run_raw("option_book", {**base, "contracts": CONTRACTS}, device="cpu").summary["contracts"]
    alone = run_raw("option_book", {**base, "contracts": [CONTRACTS[2]]}, device="cpu").summary["contracts"][0]
    assert alone["estimate"] == book[2]["estimate"] and alone["std_error"] == book[2]["std_error"]


@pytest.mark.parametrize(("bad", "message"), [
    ({"contracts": []}, "at least 1"),
    ({"contracts": [{"strike": 100, "maturity": 1.0}] * (MAX_BOOK_CONTRACTS + 1)}, f"at most {MAX_BOOK_CONTRACTS}"),
    ({"contracts": [{"strike": 100, "maturity": 0.1}], "steps_per_year": 12}, "whole number of steps"),
    ({"contracts": [{"strike": -1, "maturity": 1.0}]}, "strike\n  Value error, must be at least 0.001"),
    ({"contracts": [{"strike": 100, "maturity": 50.0}], "steps_per_year": 252}, "longest maturity"),
])
def test_bad_books_are_rejected(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_raw("option_book", bad, device="cpu")


@pytest.mark.parametrize(("model", "field"), [("black_scholes", "vol_of_vol"), ("heston", "volatility")])
def test_parameters_of_the_other_model_are_rejected(model: str, field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} do\\(es\\) not apply to model {model}"):
        run_raw("option_book", {"contracts": CONTRACTS, "model": model, field: 0.3}, device="cpu")
    defaults = run_raw("option_book", {"contracts": CONTRACTS[:1], "model": model, "paths": 1_000}, device="cpu")
    run_raw("option_book", defaults.summary["params"], device="cpu")  # echoed params: every field, at defaults
