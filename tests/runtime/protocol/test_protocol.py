"""The request parser: any bytes become a JobRequest or an InvalidRequest, never another exception.

Property-based (hypothesis) over arbitrary bytes, arbitrary JSON values and request-shaped objects with
arbitrary fields, plus the concrete hostile bodies that used to escape as other exceptions. The
standard library's ``json`` is the reference for what well-formed JSON means.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kernels.params import PARAMS_BY_TYPE, BookContract, HestonAssets, JobType
from runtime.protocol import strict_json
from runtime.protocol.messages import (
    MAX_ERROR_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_REPORTED_ERRORS,
    MIN_TIMEOUT_S,
    ErrorKind,
    InvalidRequest,
    JobError,
    JobRequest,
    is_job_id,
    parse_request,
)

# Enough examples to find the hostile corners in a few seconds on a loaded 2-core box.
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
                | st.text())
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)
field_names = st.sampled_from(["job_id", "type", "params", "session_id", "priority", "timeout_s", "extra"])
job_types = st.sampled_from([t.value for t in JobType]) | json_values
request_like = st.fixed_dictionaries(
    {"type": job_types},
    optional={"job_id": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True) | json_values,
              "params": st.dictionaries(st.sampled_from(["paths", "steps", "seed", "sleep_s", "fail", "spot",
                                                         "exposures", "volatilities", "correlation"]),
                                        json_values, max_size=4) | json_values,
              "session_id": json_values, "priority": json_values, "timeout_s": json_values},
) | st.dictionaries(field_names, json_values, max_size=6)


def _outcome(data: bytes) -> JobRequest | InvalidRequest:
    """The parser's answer; any exception other than InvalidRequest fails the test by propagating."""
    try:
        return parse_request(data)
    except InvalidRequest as exc:
        return exc


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


@PROPERTY
@given(st.binary(max_size=2048))
@example(b"[" * 5000 + b"]" * 5000)  # the body: json.loads raised RecursionError
@example(b'{"a":' * 3000 + b"1" + b"}" * 3000)
@example(b"9" * 5000)  # more digits than int() converts: json.loads raised a bare ValueError
@example(b'"\xff\xfe"')
@example('{"job_id": "utf16", "type": "noop"}'.encode("utf-16"))
def test_any_bytes_become_a_request_or_invalid_request(data: bytes) -> None:
    assert isinstance(_outcome(data), JobRequest | InvalidRequest)


@PROPERTY
@given(json_values)
def test_any_json_value_becomes_a_request_or_invalid_request(value: Any) -> None:
    outcome = _outcome(_dumps(value))
    if not isinstance(value, dict):
        assert isinstance(outcome, InvalidRequest)


@PROPERTY
@given(request_like)
def test_request_shaped_objects_keep_their_job_id_when_rejected(body: dict[str, Any]) -> None:
    outcome = _outcome(_dumps(body))
    if isinstance(outcome, InvalidRequest):
        job_id = body.get("job_id")
        # The rejection names the body's job id whenever the body had a readable one.
        if isinstance(job_id, str) and outcome.job_id is not None:
            assert outcome.job_id == job_id
    else:
        assert outcome.job_id == body["job_id"] and outcome.type.value == body["type"]


@PROPERTY
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False,
                    allow_infinity=False) | st.text(st.characters(exclude_categories=["Cs"])),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=30))
def test_well_formed_json_parses_as_the_standard_library_does(value: Any) -> None:
    text = json.dumps(value)
    assert strict_json.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("body, reason", [
    (b"[" * 5000 + b"]" * 5000, "nests deeper than"),
    (b'{"job_id": "x", "type": "noop", "timeout_s": NaN}', "NaN"),
    (b'{"job_id": "x", "type": "noop", "timeout_s": -Infinity}', "-Infinity"),
    (b'{"job_id": "x", "type": "noop", "timeout_s": 1e400}', "out of range"),
    (b'{"job_id": "x", "type": "noop", "priority": ' + b"1" * 5000 + b"}", "5000 digits"),
    (b'{"job_id": "x", "type": "noop", "job_id": "y"}', "repeats key(s) 'job_id'"),
    (b'{"job_id": "x", "type": "noop", "session_id": "\\ud800"}', "surrogate"),
    (b'{"job_id": "x", "type": "noop", "session_id": "\xc3\x28"}', "not UTF-8"),
    ('{"job_id": "x", "type": "noop"}'.encode("utf-16"), "not UTF-8"),
    (b'{"job_id": "x", "type": "noop"', "not valid JSON"),
    (b"[]", "must be a JSON object"),
    (b'{"job_id": 7, "type": "noop"}', "job_id"),
    (b'{"job_id": "x", "type": {"nested": []}}', "type"),
    (b'{"job_id": "x", "type": "random_walk", "params": [1, 2]}', "params"),
    # boundary values a kernel cannot price: once accepted, then dead-lettered after five deliveries
    (b'{"job_id": "x", "type": "european_option", "params": {"volatility": 1e-200}}', "volatility"),
    (b'{"job_id": "x", "type": "european_option", "params": {"maturity": 5e-324}}', "maturity"),
    (b'{"job_id": "x", "type": "asian_option", "params": {"volatility": 1e-200}}', "must be at least 0.001"),
    (b'{"job_id": "x", "type": "heston_option", "params": {"vol_of_vol": 1e-200}}', "vol_of_vol"),
    (b'{"job_id": "x", "type": "basket_option", "params": {"spots": [100], "weights": [1], '
     b'"volatilities": [1e-200]}}', "volatilities entries must be at least 0.001"),
    (b'{"job_id": "x", "type": "option_book", "params": {"contracts": [{"strike": 1e-300, "maturity": 1}]}}',
     "strike"),
])
def test_hostile_bodies_are_rejected_with_a_readable_reason(body: bytes, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body)
    assert reason in str(caught.value)
    assert len(str(caught.value)) < 2000  # a reason, not an echo of the body


def test_the_body_job_id_survives_a_rejection_for_the_result() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(b'{"job_id": "keep-me", "type": "noop", "params": {"sleep_s": -1}}')
    assert caught.value.job_id == "keep-me"


@pytest.mark.parametrize("value, valid", [
    ("abc", True), ("a" * 128, True), ("abc\n", False), ("abc\r", False), ("a" * 129, False), ("", False),
    (None, False), (7, False),
])
def test_is_job_id_matches_the_whole_value_as_the_model_does(value: object, valid: bool) -> None:
    assert is_job_id(value) is valid
    body = json.dumps({"job_id": value, "type": "noop"}).encode()
    assert isinstance(_outcome(body), JobRequest) is valid


def test_defaults_fill_only_the_keys_a_body_leaves_out() -> None:
    defaults = {"job_id": "from-the-file"}
    assert parse_request(b'{"type": "noop"}', defaults).job_id == "from-the-file"
    assert parse_request(b'{"job_id": "own", "type": "noop"}', defaults).job_id == "own"
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        parse_request(b"[]", defaults)


def test_size_limit_is_checked_before_parsing() -> None:
    body = b'{"job_id": "big", "type": "noop", "session_id": "' + b"a" * MAX_MESSAGE_BYTES + b'"}'
    with pytest.raises(InvalidRequest, match=f"the limit is {MAX_MESSAGE_BYTES}"):
        parse_request(body)


def test_depth_limit_counts_brackets_outside_strings_only() -> None:
    inside_a_string = json.dumps({"job_id": "s", "type": "noop", "session_id": "[" * 100}).encode()
    assert parse_request(inside_a_string).session_id == "[" * 100
    nested = json.dumps({"job_id": "d", "type": "noop", "params": _nest(strict_json.MAX_DEPTH)}).encode()
    with pytest.raises(InvalidRequest, match="nests deeper"):
        parse_request(nested)


def test_deepest_allowed_nesting_stays_far_from_the_recursion_limit() -> None:
    assert sys.getrecursionlimit() > strict_json.MAX_DEPTH * 10
    at_limit = _nest(strict_json.MAX_DEPTH - 1)
    assert strict_json.loads(json.dumps(at_limit).encode()) == at_limit


@pytest.mark.parametrize("job_type, params", [
    ("noop", {"sleep_s": 0.5, "fail": "transient"}),
    ("random_walk", {"paths": 1000, "steps": 4, "seed": 2**63 - 1}),
    ("portfolio_var", {"exposures": [1e6, -5e5], "volatilities": [0.2, 0.3],
                       "correlation": [[1.0, 0.4], [0.4, 1.0]], "paths": 1000}),
])
def test_valid_requests_round_trip(job_type: str, params: dict[str, Any]) -> None:
    request = JobRequest.model_validate({"job_id": f"ok-{job_type}", "type": job_type, "params": params,
                                         "session_id": "s-\u00e9\U0001f600", "priority": 3, "timeout_s": 60})
    assert parse_request(request.model_dump_json().encode()) == request


def _nest(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_an_old_clients_priority_is_accepted_and_dropped() -> None:
    request = parse_request(b'{"job_id": "old-1", "type": "noop", "priority": 7, "session_id": "s"}')
    assert request == parse_request(b'{"job_id": "old-1", "type": "noop", "session_id": "s"}')
    assert "priority" not in request.model_dump_json()


@pytest.mark.parametrize("value", ["10", '"high"', "-1", "2.5"])
def test_a_priority_the_old_protocol_refused_is_still_refused_saying_why(value: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^priority: .*priority no longer orders jobs"):
        parse_request(b'{"job_id": "old-2", "type": "noop", "priority": ' + value.encode() + b"}")


def test_the_wire_encoding_leaves_unset_fields_out_and_parses_back_to_the_same_request() -> None:
    request = JobRequest.model_validate({"job_id": "call-1", "type": "european_option", "params": {"paths": 1000}})
    data, attributes = request.to_message()
    assert b"null" not in data  # session_id defaults to None: left out, not sent as null
    assert parse_request(data) == request
    assert attributes == {"job_id": "call-1", "type": "european_option"}
    assert request.to_message({"drill": "x"})[1] == {"job_id": "call-1", "type": "european_option", "drill": "x"}


def _unbounded(schema: dict[str, Any]) -> list[str]:
    """Paths in a JSON schema to arrays without ``maxItems`` and strings without a length, pattern or choice."""
    definitions = schema.get("$defs", {})
    found: list[str] = []
    pending: list[tuple[str, Any]] = [("", schema)]
    seen: set[str] = set()
    while pending:
        path, node = pending.pop()
        if isinstance(node, list):
            pending.extend((path, item) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if (ref := node.get("$ref")) is not None and ref not in seen:
            seen.add(ref)
            pending.append((ref, definitions[ref.rsplit("/", 1)[-1]]))
        if node.get("type") == "array" and "maxItems" not in node:
            found.append(path)
        if node.get("type") == "string" and not {"maxLength", "pattern", "enum", "const"} & node.keys():
            found.append(path)
        for key, value in node.items():
            if key in ("properties", "items", "anyOf", "additionalProperties", "prefixItems"):
                inner = value.items() if key == "properties" else [(key, value)]
                pending.extend((f"{path}.{name}", child) for name, child in inner)
    return found


@pytest.mark.parametrize("job_type", list(JobType))
def test_every_list_and_string_of_a_request_is_bounded(job_type: JobType) -> None:
    # issue #35: `correlation` had no length limit, so one message amplified into one error per entry
    schema = PARAMS_BY_TYPE[job_type].model_json_schema()
    assert _unbounded(schema) == [], f"{job_type.value} params"
    assert _unbounded(JobRequest.model_json_schema()) == []


@pytest.mark.parametrize("job_type, params, field", [
    ("portfolio_var", {"exposures": [1], "volatilities": [0.2]}, "correlation"),
    ("portfolio_var", {"volatilities": [0.2]}, "exposures"),
    ("basket_option", {"spots": [100], "weights": [1], "volatilities": [0.2]}, "dividend_yields"),
    ("basket_option", {"spots": [100], "weights": [1]}, "volatilities"),
])
def test_a_long_list_of_bad_entries_is_one_short_reason(job_type: str, params: dict[str, Any], field: str) -> None:
    entries = [[{}] * 300_000] if field == "correlation" else [{}] * 300_000
    body = json.dumps({"job_id": "amp", "type": job_type, "params": {**params, field: entries}}).encode()
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body)
    assert len(str(caught.value)) < 200, str(caught.value)[:400]


def test_the_reported_amplification_body_is_refused_before_it_is_parsed() -> None:
    body = (b'{"job_id": "amp", "type": "portfolio_var", "params": {"exposures": [1], "volatilities": [0.2], '
            b'"correlation": [[' + b"{}," * 329_900 + b"{}]]}}")
    with pytest.raises(InvalidRequest, match="more than 100,000 values"):
        parse_request(body)


def test_a_rejection_names_the_first_errors_and_counts_the_rest() -> None:
    params = {str(i): 0 for i in range(strict_json.MAX_KEYS - 1)}
    with pytest.raises(InvalidRequest) as caught:
        parse_request(json.dumps({"job_id": "many", "type": "noop", "params": params}).encode())
    reason = str(caught.value)
    assert reason.count("Extra inputs are not permitted") == MAX_REPORTED_ERRORS
    assert reason.endswith(f"and {strict_json.MAX_KEYS - 1 - MAX_REPORTED_ERRORS} more error(s)")


def test_an_object_of_too_many_keys_is_refused_in_the_parser() -> None:
    params = {str(i): 0 for i in range(strict_json.MAX_KEYS + 1)}
    with pytest.raises(InvalidRequest, match=f"more than {strict_json.MAX_KEYS}"):
        parse_request(json.dumps({"job_id": "keys", "type": "noop", "params": params}).encode())


def test_an_error_message_is_cut_to_its_limit_and_says_how_much_was_cut() -> None:
    error = JobError(kind=ErrorKind.PERMANENT, message="x" * (MAX_ERROR_CHARS + 5_000))
    assert error.message.startswith("x" * MAX_ERROR_CHARS)
    assert error.message.endswith("(5,000 more characters)") and len(error.message) < MAX_ERROR_CHARS + 40


@pytest.mark.parametrize("timeout_s", ["5e-324", "1e-3", "0.999", "0", "-1"])
def test_a_timeout_below_the_floor_is_rejected(timeout_s: str) -> None:
    # issue #35: a noop with timeout_s 5e-324 or 1e-3 timed out on all five deliveries and was dead-lettered
    with pytest.raises(InvalidRequest, match=f"timeout_s: must be at least {MIN_TIMEOUT_S:g}"):
        parse_request(b'{"job_id": "t", "type": "noop", "timeout_s": ' + timeout_s.encode() + b"}")
    assert parse_request(b'{"job_id": "t", "type": "noop", "timeout_s": 1}').timeout_s == MIN_TIMEOUT_S


def test_a_noop_that_cannot_finish_within_its_timeout_is_rejected_not_retried() -> None:
    with pytest.raises(InvalidRequest, match="would time out on every delivery"):
        parse_request(b'{"job_id": "t", "type": "noop", "params": {"sleep_s": 60}, "timeout_s": 3}')
    assert parse_request(b'{"job_id": "t", "type": "noop", "params": {"sleep_s": 2}, "timeout_s": 3}')


_BASKET = '"type": "basket_option", "params": {"spots": [100], "weights": [1], "volatilities": [0.2]'


@pytest.mark.parametrize("body", [
    '{"job_id": "n", ' + _BASKET.replace("[100]", '["NaN"]') + "}}",
    '{"job_id": "n", ' + _BASKET.replace('"weights": [1]', '"weights": [1, "Infinity"]').replace(
        '"spots": [100]', '"spots": [100, 100]').replace("[0.2]", "[0.2, 0.2]") + "}}",
    '{"job_id": "n", ' + _BASKET + ', "dividend_yields": ["NaN"]}}',
    '{"job_id": "n", ' + _BASKET + ', "correlation": [["-Infinity"]]}}',
    '{"job_id": "n", "type": "american_option", "params": {"spots": ["NaN"], "weights": [1], "volatilities": [0.2]}}',
    '{"job_id": "n", "type": "portfolio_var", "params": {"exposures": ["NaN"], "volatilities": [0.2]}}',
    '{"job_id": "n", "type": "portfolio_var", "params": {"exposures": [1], "volatilities": ["Infinity"]}}',
    '{"job_id": "n", "type": "basket_option", "params": {"spots": [100], "weights": [1], "model": "heston", '
    '"heston": {"initial_variance": ["NaN"], "long_variance": [0.04], "mean_reversion": [1], "vol_of_vol": [0.5], '
    '"correlation": [0]}}}',
    '{"job_id": "n", "type": "european_option", "params": {"rate": "NaN"}}',
    '{"job_id": "n", "type": "noop", "params": {"sleep_s": "NaN"}}',
])
def test_non_finite_strings_are_refused_in_every_field_scalar_or_listed(body: str) -> None:
    # issue #35: "NaN" inside a list passed validation; baskets then succeeded with a null estimate. Since issue 43
    # a string is no number at all (strict types), "NaN" and "Infinity" included.
    with pytest.raises(InvalidRequest, match="valid number"):
        parse_request(body.encode())


def test_every_float_field_of_the_protocol_refuses_non_finite_values() -> None:
    for model in (*PARAMS_BY_TYPE.values(), HestonAssets, BookContract, JobRequest):
        assert model.model_config.get("allow_inf_nan") is False, model.__name__


_LOOSE = [  # issue 43: each was coerced into a valid request
    ({"type": "european_option", "params": {"paths": True}}, "params.paths: Input should be a valid integer"),
    ({"type": "european_option", "params": {"antithetic": "yes"}}, "params.antithetic: Input should be a valid bool"),
    ({"type": "european_option", "params": {"control_variate": 1}}, "params.control_variate: Input should be a valid"),
    ({"type": "random_walk", "params": {"paths": " 1_000 "}}, "params.paths: Input should be a valid integer"),
    ({"type": "random_walk", "params": {"seed": "7"}}, "params.seed: Input should be a valid integer"),
    ({"type": "random_walk", "params": {"steps": 2.5}}, "params.steps: Input should be a valid integer"),
    ({"type": "european_option", "params": {"spot": "100"}}, "params.spot: Input should be a valid number"),
    ({"type": "noop", "params": {"sleep_s": False}}, "params.sleep_s: Input should be a valid number"),
    ({"type": "noop", "timeout_s": "60"}, "timeout_s: Input should be a valid number"),
    ({"type": "noop", "priority": True}, "priority: Input should be a valid integer"),
    ({"type": "noop", "session_id": 7}, "session_id: Input should be a valid string"),
    ({"type": "noop", "session_id": "desk\u0000"}, "session_id: must be printable text"),
    ({"type": "noop", "session_id": "desk\n200 OK"}, "session_id: must be printable text"),
    ({"type": "noop", "session_id": "\u001b[2Jdesk"}, "session_id: must be printable text"),
    ({"type": "noop", "session_id": "desk\u202e"}, "session_id: must be printable text"),
]


@pytest.mark.parametrize("body, reason", _LOOSE)
def test_a_value_of_the_wrong_json_type_is_refused_not_coerced(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_request(json.dumps({"job_id": "loose", **body}).encode())
    assert reason in str(refused.value) and refused.value.job_id == "loose"


def test_json_numbers_keep_their_meaning_an_int_for_a_float_and_a_whole_float_for_an_int() -> None:
    # what users write today: `"spot": 100` (examples/), `gpurt submit -p paths=1e6`, `"timeout_s": 60`
    request = parse_request(b'{"job_id": "n", "type": "european_option", "session_id": "desk 7 \xc3\xa9",'
                            b' "timeout_s": 60, "params": {"spot": 100, "paths": 1e6, "seed": 7.0, "kind": "put",'
                            b' "greeks": ["delta"], "antithetic": false}}')
    params = request.params
    assert isinstance(params.spot, float) and params.spot == 100.0 and request.timeout_s == 60.0
    assert type(params.paths) is int and params.paths == 1_000_000 and type(params.seed) is int
    assert params.kind == "put" and params.greeks == ["delta"] and params.antithetic is False


def test_every_example_job_file_is_still_a_valid_request() -> None:
    from pathlib import Path

    examples = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.json"))
    assert len(examples) >= 9
    for path in examples:
        assert parse_request(path.read_bytes()).job_id, path.name


def test_a_python_caller_may_still_pass_tuples_and_numpy_values() -> None:
    # strict mode is for the wire; gpurt.client's params classes are built from Python values, which lax mode took
    import numpy as np

    params = PARAMS_BY_TYPE[JobType.PORTFOLIO_VAR](exposures=np.array([1e6, 2e6]), volatilities=(0.2, 0.3),
                                                   correlation=np.eye(2), paths=np.int64(1000))
    assert params.exposures == [1e6, 2e6] and params.volatilities == [0.2, 0.3]
    assert params.correlation == [[1.0, 0.0], [0.0, 1.0]] and type(params.paths) is int and params.paths == 1000
