"""The document corpus against each encoding of the configuration format that judges a
document: botctl's validator and the JSON Schema (schemas/botctl.schema.json, through the
`jsonschema` package). See documents.py for the case format."""

from __future__ import annotations

import jsonschema
import pytest

from tests.conformance.documents import (
    DocumentCase,
    Finding,
    judge_json_schema,
    judge_validator,
    load_cases,
    opposite,
    run_json_schema,
    run_validator,
    schema_validator,
)

CASES = load_cases()
IDS = [case_id for case_id, _ in CASES]
MINIMUM_CASES = 60


@pytest.fixture(scope="module")
def schema() -> jsonschema.Draft202012Validator:
    return schema_validator()


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=IDS)
def test_validator(case: DocumentCase) -> None:
    problems = judge_validator(case, run_validator(case))
    assert not problems, "\n".join(problems) + "\n--- document:\n" + case.text()


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=IDS)
def test_json_schema(case: DocumentCase, schema: jsonschema.Draft202012Validator) -> None:
    problems = judge_json_schema(case, run_json_schema(case, schema))
    assert not problems, "\n".join(problems) + "\n--- document:\n" + case.text()


def test_corpus_size_and_coverage() -> None:
    assert len(CASES) >= MINIMUM_CASES
    verdicts = {case.expect for _, case in CASES}
    assert verdicts == {"valid", "warning", "error"}
    assert any(case.json_schema for _, case in CASES)  # the differences are on record


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=IDS)
def test_every_case_can_fail(case: DocumentCase) -> None:
    """The judges are not vacuous: the opposite verdict, or the right verdict with another
    message, is reported as a failure for every case."""
    assert judge_validator(case, Finding(opposite(case.expect)))
    assert judge_json_schema(case, Finding(opposite(case.schema_expect)))
    if case.expect != "valid":
        assert judge_validator(case, Finding(case.expect, ((1, "something else"),)))
