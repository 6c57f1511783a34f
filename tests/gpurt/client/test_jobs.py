"""The typed builders are the protocol's own models: same fields, same limits, same requests."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpurt.client import (
    AmericanOption,
    Basket,
    Contract,
    EuropeanOption,
    HestonOption,
    Noop,
    OptionBook,
    PortfolioVaR,
)
from gpurt.client.jobs import BUILDERS, Job
from kernels.params import MAX_PATHS, MIN_PRICE, PARAMS_BY_TYPE, JobType
from runtime.protocol.messages import parse_request


def test_there_is_a_builder_for_every_job_type_and_it_is_that_types_params_model() -> None:
    assert set(BUILDERS) == set(JobType)
    for job_type, builder in BUILDERS.items():
        model = PARAMS_BY_TYPE[job_type]
        assert issubclass(builder, model)
        # the very same field definitions (pydantic copies them per class): nothing is declared twice
        assert {k: repr(v) for k, v in builder.model_fields.items()} == {
            k: repr(v) for k, v in model.model_fields.items()}
        assert set(vars(builder).get("__annotations__", {})) <= {"job_type"}


def test_a_builder_takes_its_job_type_from_the_parameter_model_it_extends() -> None:
    class MyCall(EuropeanOption):
        """A user's own builder keeps the type of the model it extends."""

    assert MyCall.job_type is JobType.EUROPEAN_OPTION
    assert MyCall(paths=10_000).request("c1").type is JobType.EUROPEAN_OPTION
    with pytest.raises(TypeError, match="Orphan extends no job type's parameter model"):
        type("Orphan", (Job,), {})


@pytest.mark.parametrize("job", [
    EuropeanOption(spot=100, strike=105, greeks=["delta", "vega"], paths=10_000),
    HestonOption(strike=90, vol_of_vol=0.3, steps=16, paths=10_000),
    Basket(spots=[100, 90], weights=[1, 1], volatilities=[0.2, 0.3], strike=190, paths=10_000),
    Basket(spots=[100], weights=[1], model="heston", strike=100, paths=10_000,
           heston={"initial_variance": [0.04], "long_variance": [0.04], "mean_reversion": [1.0],
                   "vol_of_vol": [0.3], "correlation": [-0.5]}),
    AmericanOption(spots=[100], weights=[1], volatilities=[0.2], kind="put", paths=10_000),
    OptionBook([Contract(strike=90, maturity=0.5), {"strike": 110, "maturity": 1.0, "kind": "put"}]),
    PortfolioVaR(exposures=[1e6, 2e6], volatilities=[0.2, 0.3], paths=10_000),
    Noop(sleep_s=0.5),
])
def test_a_builders_request_reads_back_as_the_scheduler_parses_it(job: object) -> None:
    request = job.request("job-1", session_id="s")  # type: ignore[attr-defined]
    parsed = parse_request(request.model_dump_json().encode())  # the scheduler's own parser
    assert parsed.type is type(job).job_type  # type: ignore[attr-defined]
    assert parsed.params.model_dump() == PARAMS_BY_TYPE[parsed.type].model_validate(
        job.model_dump()).model_dump()  # type: ignore[attr-defined]


def test_a_value_past_its_limit_fails_at_once_naming_field_and_limit() -> None:
    with pytest.raises(ValidationError) as caught:
        EuropeanOption(strike=-5)
    assert "strike" in str(caught.value) and f"at least {MIN_PRICE:g}" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        EuropeanOption(paths=MAX_PATHS + 1)
    assert "paths" in str(caught.value) and f"less than or equal to {MAX_PATHS}" in str(caught.value)


def test_a_misspelt_field_fails_at_once_naming_it() -> None:
    with pytest.raises(ValidationError, match="strik"):
        EuropeanOption(strik=105)


def test_a_cross_field_refusal_is_the_protocols_own() -> None:
    with pytest.raises(ValidationError, match="weights has 1 entries, spots has 2"):
        Basket(spots=[100, 90], weights=[1], volatilities=[0.2, 0.3])
    with pytest.raises(ValidationError, match="not a whole number of steps"):
        OptionBook([Contract(strike=100, maturity=0.3333)], steps_per_year=12)


def test_an_option_book_takes_its_contracts_positionally_or_by_name() -> None:
    contracts = [Contract(strike=100, maturity=1.0)]
    assert OptionBook(contracts, paths=1000) == OptionBook(contracts=contracts, paths=1000)
