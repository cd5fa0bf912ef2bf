"""The HTTP corpus against the sandbox (served over real HTTP on 127.0.0.1) and against the
OpenAPI document. See exchanges.py for the case format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from botctl import contract
from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.server import RunningSandbox, run_in_thread
from tests.conformance.exchanges import (
    EXTRA_MODELS,
    EXTRA_SOURCES,
    WORLD,
    Answer,
    HttpCase,
    OpenApi,
    judge_openapi,
    judge_request,
    judge_sandbox,
    load_cases,
    send,
)

CASES = load_cases()
IDS = [case_id for case_id, _ in CASES]
MINIMUM_CASES = 40
RATE = 0.001  # requests/s: one request per key, then 429 for the rest of the test


def _config(db: Path, rate_limit: float = 0) -> SandboxConfig:
    return SandboxConfig(
        db=str(db),
        seed=WORLD,
        extra_models=EXTRA_MODELS,
        extra_sources=EXTRA_SOURCES,
        rate_limit=rate_limit,
    )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, RunningSandbox]]:
    """The sandbox as the corpus sees it, and the same one rate limited."""
    folder = tmp_path_factory.mktemp("conformance")
    with (
        run_in_thread(_config(folder / "open.db")) as open_,
        run_in_thread(_config(folder / "limited.db", RATE)) as limited,
    ):
        yield {False: open_, True: limited}


@pytest.fixture(scope="module")
def api() -> OpenApi:
    return OpenApi()


def exchange(case: HttpCase, server: RunningSandbox) -> Answer:
    """Reset the world, run the setup, spend the rate limit if asked, send the request."""
    with httpx.Client(base_url=server.url, timeout=10) as admin:
        assert admin.post("/_sandbox/reset").status_code == 200
    with httpx.Client(base_url=server.api_url + "/", timeout=10) as client:
        for step in case.setup:
            done = send(client, step)
            assert done.status < 300, f"setup {step.method} {step.path}: {done}"
        if case.limited:
            send(client, case.request)
        return send(client, case.request)


@pytest.fixture(scope="module")
def answers(servers: dict[bool, RunningSandbox]) -> dict[str, Answer]:
    """Every case's answer, each exchanged once and judged by both tests."""
    return {case_id: exchange(case, servers[case.limited]) for case_id, case in CASES}


@pytest.mark.parametrize("case_id", IDS)
def test_sandbox(case_id: str, answers: dict[str, Answer]) -> None:
    case = dict(CASES)[case_id]
    problems = judge_sandbox(case, answers[case_id])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case_id", IDS)
def test_openapi(case_id: str, answers: dict[str, Answer], api: OpenApi) -> None:
    case = dict(CASES)[case_id]
    problems = judge_openapi(case, answers[case_id], api)
    assert not problems, "\n".join(problems)


def test_corpus_size_and_coverage(api: OpenApi) -> None:
    assert len(CASES) >= MINIMUM_CASES
    covered = {
        (op.method, op.template)
        for _, case in CASES
        if (op := api.operation(case.request.method, case.request.path)) is not None
    }
    documented = {
        (method, path)
        for path, item in api.doc["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert covered == documented  # every operation has cases
    assert any(case.limited for _, case in CASES)
    assert any(case.openapi_request for _, case in CASES)  # the differences are on record


@pytest.mark.parametrize("case_id", IDS)
def test_every_case_can_fail(case_id: str, api: OpenApi) -> None:
    """The judges are not vacuous: another status, or the opposite verdict on the request,
    is reported as a failure for every case."""
    case = dict(CASES)[case_id]
    other = 418
    assert judge_sandbox(case, Answer(other, "application/json", {"message": "x"}))
    assert judge_openapi(case, Answer(other, "application/json", {"message": "x"}), api)
    right = Answer(case.status, "application/json", {"message": case.message})
    flipped = Answer(400, "application/json", {"message": contract.MSG_INVALID_DATA})
    if right.refused_request:
        flipped = Answer(200, "application/json", {"message": "Success"})
    assert judge_request(case, flipped, api)
