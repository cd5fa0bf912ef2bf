"""read_live against mock services: normalisation, existence, fallbacks, request counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from botctl.errors import ApiError, ServiceError
from botctl.models import BotSpec, Live
from botctl.resources import settings
from botctl.resources.attribute_model import CustomAttribute
from botctl.service.client import RetryPolicy, ServiceClient
from botctl.service.live import read_live, refused_read_notes


def normalise_settings(record: dict[str, Any]) -> dict[str, Any]:
    return settings.read_live(record)[0].json_fields


BASE = "https://api.example.test/api/v1"


async def _no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


FAST = RetryPolicy(sleep=_no_sleep, random=lambda: 0.0)


class FakeService:
    """Answers the two reads from in-memory data and counts every request by path."""

    def __init__(
        self,
        chatbots: Any,
        attributes: dict[str, list[dict[str, Any]]] | None = None,
        *,
        list_status: int = 200,
        attr_status: int = 200,
        attr_message: str = "Success",
    ) -> None:
        self.chatbots = chatbots
        self.attributes = attributes or {}
        self.list_status = list_status
        self.attr_status = attr_status
        self.attr_message = attr_message
        self.calls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1")
        self.calls[path] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)  # let other reads start, so concurrency is observable
        self.in_flight -= 1
        if path == "/get-chatbots":
            if self.list_status != 200:
                return httpx.Response(self.list_status, json={"message": "Not Found"})
            return httpx.Response(200, json=self.chatbots)
        chatbot_id = path.split("/")[2]
        if self.attr_status != 200:
            return httpx.Response(self.attr_status, json={"message": self.attr_message})
        data = self.attributes.get(chatbot_id, [])
        return httpx.Response(200, json={"message": "Success", "data": data})

    def client(self, key: str = "k-123456") -> ServiceClient:
        return ServiceClient(BASE, key, transport=httpx.MockTransport(self), retry=FAST)


def bot(chatbot_id: str, env: str = "BOTCTL_API_KEY") -> BotSpec:
    return BotSpec(name=chatbot_id, chatbot_id=chatbot_id, api_key_env=env)


def read(bots: list[BotSpec], clients: dict[str, ServiceClient], **kwargs: Any) -> Live:
    async def main() -> Live:
        try:
            return await read_live(bots, clients, **{"concurrency": 8, **kwargs})
        finally:
            for client in clients.values():
                await client.aclose()

    return asyncio.run(main())


SNAKE_RECORD = {
    "id": "b1",
    "name": "Support",
    "status": "ready",
    "created_at": "2024-01-01",
    "model": "gpt-5-mini",
    "temp": 0.2,
    "ip_limit": 20,
    "ip_limit_timeframe": 3600,
    "ip_limit_message": "Slow down",
    "initial_messages": ["Hi!"],
    "suggested_messages": [],
    "domains": ["example.com"],
    "only_allow_on_added_domains": False,
    "visibility": "public",
    "instructions": None,
    "styles": {
        "theme": "dark",
        "button_color": "#0a84ff",
        "align_chat_button": "right",
        "auto_open_chat_window_after": 0,
        "font": "Inter",
        "display_name": None,
    },
    "collect_customer_information": {
        "title": "Contact us",
        "name": {"active": True, "label": "Name", "placeholder": "x"},
        "phone": None,
        "extra": 1,
    },
}

EXPECTED_SETTINGS = {
    "name": "Support",
    "model": "gpt-5-mini",
    "temp": 0.2,
    "ipLimit": 20,
    "ipLimitTimeframe": 3600,
    "ipLimitMessage": "Slow down",
    "initialMessages": ["Hi!"],
    "suggestedMessages": [],
    "domains": ["example.com"],
    "onlyAllowOnAddedDomains": False,
    "visibility": "public",
    "styles": {
        "theme": "dark",
        "buttonColor": "#0a84ff",
        "alignChatButton": "right",
        "autoOpenChatWindowAfter": 0,
    },
    "collectCustomerInformation": {
        "title": "Contact us",
        "name": {"active": True, "label": "Name"},
    },
}


@pytest.mark.parametrize(
    "shape", [lambda r: {"chatbots": [r]}, lambda r: {"chatbots": {"data": [r]}}]
)
def test_snake_case_records_normalise_to_camel_case_writable_fields(shape: Any) -> None:
    service = FakeService(shape(SNAKE_RECORD))
    live = read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    got = live.bots["b1"]
    assert got.exists
    assert got.settings is not None
    assert got.settings.json_fields == EXPECTED_SETTINGS
    assert got.attributes == {}


def test_documented_camel_case_record_keeps_its_names() -> None:
    record = {"id": "b1", "name": "N", "status": "ready", "visibility": "private", "model": "auto"}
    assert normalise_settings(record) == {"name": "N", "visibility": "private", "model": "auto"}


def test_camel_case_wins_over_its_snake_case_twin() -> None:
    assert normalise_settings({"ip_limit": 1, "ipLimit": 2}) == {"ipLimit": 2}
    assert normalise_settings({"ipLimit": 2, "ip_limit": 1}) == {"ipLimit": 2}


def test_unreadable_nested_objects_are_not_observable() -> None:
    record = {"styles": "dark", "collect_customer_information": {"extra": 1}}
    assert normalise_settings(record) == {}


@pytest.mark.parametrize("id_key", ["id", "chatbotId", "chatbot_id"])
def test_record_id_keys(id_key: str) -> None:
    service = FakeService({"chatbots": [{id_key: "b1", "name": "N"}]})
    live = read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    assert live.bots["b1"].exists
    settings = live.bots["b1"].settings
    assert settings is not None
    assert settings.json_fields == {"name": "N"}


def test_attributes_parse_leniently() -> None:
    attrs: list[dict[str, Any]] = [
        {"name": "tier", "type": "text", "label": "Tier", "description": None, "id": 7},
        {"name": "old", "type": "number", "label": "Old", "archived": True, "created_at": 1},
    ]
    service = FakeService({"chatbots": [{"id": "b1"}]}, {"b1": attrs})
    live = read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    assert live.bots["b1"].attributes == {
        "tier": CustomAttribute(name="tier", type="text", label="Tier"),
        "old": CustomAttribute(name="old", type="number", label="Old", archived=True),
    }


OFF_CONTRACT = [
    # record, the name shown, the reason
    ({"name": "has space", "type": "text"}, "has space", 'name "has space" is not an attribute'),
    ({"name": "x", "type": "select"}, "x", 'type "select" is not one of text, number'),
    ({"name": "y", "type": "text", "archived": 0}, "y", "archived 0 is not true or false"),
    ({"name": "z"}, "z", "no type"),
    ({"type": "text", "label": "L"}, None, "no name"),
    ({"name": 5, "type": "text"}, None, "name 5 is not text"),
    ({"name": "w", "type": "text", "label": ["a"]}, "w", 'label ["a"] is not text'),
]


@pytest.mark.parametrize(("record", "name", "reason"), OFF_CONTRACT)
def test_an_off_contract_attribute_record_is_set_aside_with_the_reason(
    record: Any, name: str | None, reason: str
) -> None:
    """One record outside the contract's rules used to abort the read of the chatbot (and
    the run): it is kept aside, and the chatbot's other attributes read as usual."""
    good = {"name": "tier", "type": "text", "label": "Tier", "unknown_field": 1}
    service = FakeService({"chatbots": [{"id": "b1"}]}, {"b1": [record, good]})
    live = read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    found = live.bots["b1"]
    assert found.attributes == {"tier": CustomAttribute(name="tier", type="text", label="Tier")}
    [held] = found.off_contract
    assert held.name == name
    assert held.reason.startswith(reason), held.reason


def test_a_bot_missing_from_the_list_does_not_exist_and_is_not_read_further() -> None:
    service = FakeService({"chatbots": [{"id": "b1"}]})
    live = read([bot("b1"), bot("ghost")], {"BOTCTL_API_KEY": service.client()})
    ghost = live.bots["ghost"]
    assert (ghost.exists, ghost.settings, ghost.attributes) == (False, None, None)
    assert service.calls["/chatbots/ghost/custom-attributes"] == 0
    assert service.calls["/chatbots/b1/custom-attributes"] == 1


def test_one_list_read_per_client_and_one_attribute_read_per_bot() -> None:
    first = FakeService({"chatbots": [{"id": f"a{i}"} for i in range(5)]})
    second = FakeService({"chatbots": {"data": [{"id": "b0"}, {"id": "b1"}]}})
    shared = first.client()
    clients = {"KEY_A": shared, "KEY_A_ALIAS": shared, "KEY_B": second.client("k-999999")}
    bots = [bot(f"a{i}", "KEY_A" if i % 2 else "KEY_A_ALIAS") for i in range(5)]
    bots += [bot("b0", "KEY_B"), bot("b1", "KEY_B"), bot("b1", "KEY_B")]
    live = read(bots, clients)
    assert set(live.bots) == {"a0", "a1", "a2", "a3", "a4", "b0", "b1"}
    assert first.calls["/get-chatbots"] == 1
    assert second.calls["/get-chatbots"] == 1
    assert sum(first.calls.values()) == 1 + 5
    assert sum(second.calls.values()) == 1 + 2


def test_attribute_reads_run_concurrently_within_the_bound() -> None:
    service = FakeService({"chatbots": [{"id": f"b{i}"} for i in range(20)]})
    read([bot(f"b{i}") for i in range(20)], {"BOTCTL_API_KEY": service.client()}, concurrency=3)
    assert 1 < service.max_in_flight <= 3


@pytest.mark.parametrize("status", [405, 501])
def test_without_a_chatbot_list_settings_are_unreadable_but_attributes_still_read(
    status: int,
) -> None:
    service = FakeService(None, {"b1": [{"name": "tier", "type": "text"}]}, list_status=status)
    live = read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    got = live.bots["b1"]
    assert (got.exists, got.settings) == (True, None)
    assert got.attributes == {"tier": CustomAttribute(name="tier", type="text")}


def test_without_any_reads_everything_is_unknown() -> None:
    service = FakeService(None, list_status=405, attr_status=404, attr_message="Not Found")
    client = service.client()
    live = read([bot("b1")], {"BOTCTL_API_KEY": client})
    got = live.bots["b1"]
    assert (got.exists, got.settings, got.attributes) == (True, None, None)
    notes = refused_read_notes({"BOTCTL_API_KEY": client, "ALIAS": client})
    assert len(notes) == 2  # one per refused read, however many names share the client
    assert notes[0].startswith("the service answered read attributes with HTTP 404")
    assert "settings are compared with what botctl last applied" in notes[1]


def test_a_404_on_the_chatbot_list_is_an_error_not_a_service_without_reads() -> None:
    """A wrong base URL answers 404 everywhere: that must never become a confident plan."""
    service = FakeService(None, list_status=404, attr_status=404, attr_message="Not Found")
    with pytest.raises(ApiError) as info:
        read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    assert info.value.status == 404
    assert f"GET {BASE}/get-chatbots" in str(info.value)
    assert "is --api-url right?" in str(info.value)
    assert service.calls["/chatbots/b1/custom-attributes"] == 0


def test_with_reads_off_nothing_is_sent_and_everything_is_unknown() -> None:
    service = FakeService({"chatbots": [{"id": "b1", "name": "Live"}]})
    client = ServiceClient(BASE, "k-1", transport=httpx.MockTransport(service), reads=False)
    live = read([bot("b1")], {"BOTCTL_API_KEY": client})
    got = live.bots["b1"]
    assert (got.exists, got.settings, got.attributes) == (True, None, None)
    assert service.calls == Counter()
    assert refused_read_notes({"BOTCTL_API_KEY": client}) == ()  # declared, not refused


def test_chatbot_not_found_on_attribute_read_propagates() -> None:
    service = FakeService(None, list_status=405, attr_status=404, attr_message="Chatbot not found")
    with pytest.raises(ApiError) as info:
        read([bot("b1")], {"BOTCTL_API_KEY": service.client()})
    assert info.value.status == 404
    assert info.value.chatbot_id == "b1"


def test_auth_failure_propagates_as_the_botctl_error_not_a_group() -> None:
    service = FakeService(None, list_status=401)
    with pytest.raises(ApiError) as info:
        read([bot("b1"), bot("b2")], {"BOTCTL_API_KEY": service.client()})
    assert info.value.status == 401


def test_a_bot_without_a_client_is_a_service_error() -> None:
    with pytest.raises(ServiceError, match=r"no API client for \$OTHER"):
        read([bot("b1", "OTHER")], {})


def test_the_collector_is_off_during_the_reads_and_on_after() -> None:
    """A large fleet's reads would have the cycle collector scan what the run holds again
    and again: it is off while they run, back on after, failed or not."""
    import gc

    seen: list[bool] = []

    class Watching(FakeService):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            seen.append(gc.isenabled())
            return await super().__call__(request)

    assert gc.isenabled()
    read([bot("b1")], {"BOTCTL_API_KEY": Watching({"chatbots": [{"id": "b1"}]}).client()})
    assert seen
    assert not any(seen)
    assert gc.isenabled()
    with pytest.raises(ApiError):
        read([bot("b1")], {"BOTCTL_API_KEY": Watching(None, list_status=401).client()})
    assert gc.isenabled()
    gc.disable()  # a caller's own pause is left as it was
    try:
        read([bot("b1")], {"BOTCTL_API_KEY": Watching({"chatbots": [{"id": "b1"}]}).client()})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_garbage_of_the_run_is_freed_by_the_next_young_collections() -> None:
    """Nothing is set aside where only a full collection finds it (``gc.freeze`` then
    ``unfreeze`` did that: the garbage of every pass of a long-running agent waited for a rare
    full collection, and its memory grew): cyclic garbage of the run, made before the reads
    or during them, goes the usual way, freed by the young collections that follow."""
    import gc
    import weakref

    class Node:
        def __init__(self) -> None:
            self.me = self

    held = [Node() for _ in range(100)]  # the run's, dropped during the reads
    left = [weakref.ref(node) for node in held]

    class Littering(FakeService):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            held.clear()
            left.extend(weakref.ref(Node()) for _ in range(100))
            return await super().__call__(request)

    thresholds = gc.get_threshold()
    gc.set_threshold(1_000_000)  # no young collection moves them before the test's own
    try:
        read([bot("b1")], {"BOTCTL_API_KEY": Littering({"chatbots": [{"id": "b1"}]}).client()})
    finally:
        gc.set_threshold(*thresholds)
    assert len(left) > 100
    gc.collect(1)
    assert all(ref() is None for ref in left)
