"""Fault injection (before/after, drop, status + Retry-After, latency) and the rate limit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from botctl import contract
from botctl.sandbox.server import RunningSandbox

Factory = Callable[..., RunningSandbox]
SETTINGS = "/api/v1/update-chatbot-settings"


def fault(admin: httpx.Client, **spec: Any) -> None:
    response = admin.post("/_sandbox/faults", json={"path": SETTINGS, **spec})
    assert response.status_code == 201, response.text


def name_of(admin: httpx.Client) -> str:
    return str(admin.get("/_sandbox/state").json()["chatbots"][0]["settings"]["name"])


def rename(api: httpx.Client, bot: str, name: str) -> httpx.Response:
    return api.post("/update-chatbot-settings", json={"chatbotId": bot, "name": name})


def test_status_before_changes_nothing(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    fault(admin, method="POST", status=503, retry_after=1.5, count=2)
    for _ in range(2):
        response = rename(api, bot, "X")
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "1.5"
    assert name_of(admin) == "Support"
    assert rename(api, bot, "X").status_code == 202  # count exhausted
    assert name_of(admin) == "X"


def test_status_after_keeps_the_change(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    fault(admin, status=500, when="after")
    response = rename(api, bot, "Y")
    assert response.status_code == 500
    assert response.json() == {"message": contract.MSG_INTERNAL}
    assert name_of(admin) == "Y"


@pytest.mark.parametrize(("when", "expected"), [("before", "Support"), ("after", "Z")])
def test_drop_looks_like_a_dropped_connection(
    api: httpx.Client, admin: httpx.Client, bot: str, when: str, expected: str
) -> None:
    fault(admin, drop=True, when=when)
    with pytest.raises(httpx.RemoteProtocolError):
        rename(api, bot, "Z")
    assert name_of(admin) == expected
    assert rename(api, bot, "W").status_code == 202  # the client recovers on a new connection
    log = admin.get("/_sandbox/requests").json()["requests"]
    assert log[-2]["status"] is None
    assert log[-2]["fault"] == when


def test_latency_fault(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    fault(admin, latency_ms=150)
    started = time.perf_counter()
    assert rename(api, bot, "slow").status_code == 202
    assert time.perf_counter() - started >= 0.15
    started = time.perf_counter()
    rename(api, bot, "fast")
    assert time.perf_counter() - started < 0.15


def test_fault_matching(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    fault(admin, method="GET", status=500)  # method does not match a POST
    assert rename(api, bot, "A").status_code == 202
    admin.delete("/_sandbox/faults")
    admin.post(
        "/_sandbox/faults", json={"path": "/api/v1/chatbots/*/custom-attributes", "status": 500}
    )
    assert api.get(f"/chatbots/{bot}/custom-attributes/plan").status_code == 405  # no match
    assert api.get(f"/chatbots/{bot}/custom-attributes").status_code == 500
    assert admin.get("/_sandbox/faults").json()["faults"] == []


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"path": SETTINGS},
        {"path": SETTINGS, "status": 200},
        {"path": SETTINGS, "status": 500, "drop": True},
        {"path": SETTINGS, "status": 500, "count": 0},
        {"path": SETTINGS, "status": 500, "when": "during"},
        {"path": SETTINGS, "retry_after": 1, "drop": True},
        {"path": SETTINGS, "status": 500, "bogus": 1},
    ],
)
def test_bad_fault_spec(admin: httpx.Client, spec: dict[str, Any]) -> None:
    response = admin.post("/_sandbox/faults", json=spec)
    assert response.status_code == 400
    assert response.json()["message"]


def test_rate_limit(sandbox_factory: Factory) -> None:
    running = sandbox_factory(rate_limit=2)
    httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "b"}).raise_for_status()
    attributes = "/chatbots/b/custom-attributes"
    headers = {"Authorization": "Bearer test-key"}
    with httpx.Client(base_url=running.api_url, headers=headers) as client:
        ok = [client.get(attributes) for _ in range(2)]
        assert [r.status_code for r in ok] == [200, 200]
        assert ok[0].headers["X-RateLimit-Limit"] == "2"
        assert ok[1].headers["X-RateLimit-Remaining"] == "0"
        limited = client.get(attributes)
        assert limited.status_code == 429
        assert limited.json() == {"message": contract.MSG_RATE_LIMITED}
        assert int(limited.headers["Retry-After"]) >= 1
        assert int(limited.headers["X-RateLimit-Reset"]) > time.time() * 1000
        # The same bucket serves every limited operation of the key (contacts too).
        assert client.get("/chatbots/b/contacts").status_code == 429
        other = client.get(attributes, headers={"Authorization": "Bearer other"})
        assert other.status_code == 401  # a different key has its own bucket
        time.sleep(0.55)
        assert client.get(attributes).status_code == 200


def test_rate_limit_spares_operations_without_a_documented_429(sandbox_factory: Factory) -> None:
    """Contract 7/8: only the contact and custom attribute operations may answer 429; the
    others are neither refused nor counted, whatever the pace."""
    running = sandbox_factory(rate_limit=1)
    httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "b"}).raise_for_status()
    headers = {"Authorization": "Bearer test-key"}
    with httpx.Client(base_url=running.api_url, headers=headers) as client:
        for _ in range(3):
            listed = client.get("/get-chatbots")
            assert listed.status_code == 200
            assert "X-RateLimit-Limit" not in listed.headers
            saved = client.post("/update-chatbot-settings", json={"chatbotId": "b", "temp": 0})
            assert saved.status_code == 202
        assert client.get("/chatbots/b/custom-attributes").status_code == 200  # not spent
        assert client.get("/chatbots/b/custom-attributes").status_code == 429


def test_configured_latency(sandbox_factory: Factory) -> None:
    running = sandbox_factory(latency_ms=60)
    started = time.perf_counter()
    response = httpx.get(f"{running.api_url}/get-chatbots")
    assert response.status_code == 401
    assert time.perf_counter() - started >= 0.06
