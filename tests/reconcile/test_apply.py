"""apply_plan against a scripted fake service: ordering, partial failure, and attribute
creates whose outcome is unknown (never created twice)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from botctl.errors import AmbiguousApiError, ApiError, TransportError
from botctl.plan import BotRef, Operation, OperationKind, Plan
from botctl.reconcile.apply import INTERRUPTED, ApplyReport, OpResult, Stop, apply_plan
from tests.factories import operation

ATTR = {"name": "tier", "type": "text", "label": "Tier", "archived": False}


class FakeService:
    """Attributes per chatbot; ``faults`` is a list of (method, exception, applied_anyway)."""

    def __init__(self, *, reads: bool = True) -> None:
        self.attributes: dict[str, dict[str, dict[str, Any]]] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.faults: list[tuple[str, Exception, bool]] = []
        self.calls: list[str] = []
        self.reads = reads

    def _fault(self, method: str) -> tuple[Exception, bool] | None:
        for i, (m, exc, applied) in enumerate(self.faults):
            if m == method:
                del self.faults[i]
                return exc, applied
        return None

    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None:
        self.calls.append("settings")
        fault = self._fault("settings")
        if fault and fault[1]:
            self.settings.setdefault(chatbot_id, {}).update(fields)
        if fault:
            raise fault[0]
        self.settings.setdefault(chatbot_id, {}).update(fields)

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        attrs = self.attributes.setdefault(chatbot_id, {})
        fault = self._fault("create")
        if fault and not fault[1]:
            raise fault[0]
        if body["name"] in attrs:
            raise ApiError("create attribute", 400, "Custom attribute already exists")
        attrs[body["name"]] = dict(body)
        if fault:
            raise fault[0]
        return dict(body)

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append("update")
        attrs = self.attributes.setdefault(chatbot_id, {})
        if name not in attrs:
            raise ApiError("update attribute", 404, "Custom attribute not found")
        attrs[name].update(body)
        return attrs[name]

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]:
        self.calls.append("list")
        if not self.reads:
            raise ApiError("read attributes", 404, "Resource not found")
        return list(self.attributes.get(chatbot_id, {}).values())


def ref(chatbot_id: str = "b1") -> BotRef:
    return BotRef(chatbot_id, chatbot_id, "KEY")


def op(kind: OperationKind, chatbot_id: str = "b1", key: str = "tier") -> Operation:
    body: dict[str, Any] = {"name": "A"} if kind == "update_settings" else dict(ATTR)
    return operation(kind, key, body, ref=ref(chatbot_id))


def run(plan: Plan, service: FakeService) -> tuple[ApplyReport, list[OpResult]]:
    seen: list[OpResult] = []
    report = asyncio.run(apply_plan(plan, {"KEY": service}, on_result=seen.append, parallelism=8))
    return report, seen


def drop() -> TransportError:
    return TransportError("create attribute tier", "connection dropped", outcome_unknown=True)


@pytest.mark.parametrize("reads", [True, False])
@pytest.mark.parametrize(
    "fault",
    [drop(), AmbiguousApiError("create attribute tier", 500, "Internal server error")],
    ids=["dropped", "500"],
)
def test_uncertain_create_that_succeeded_is_not_repeated(reads: bool, fault: Exception) -> None:
    service = FakeService(reads=reads)
    service.faults.append(("create", fault, True))  # the service made it, the client can't tell
    report, _ = run(Plan(operations=(op("create_attribute"),)), service)
    assert report.ok, report.results
    assert service.calls.count("create") == 1
    assert list(service.attributes["b1"]) == ["tier"]


@pytest.mark.parametrize("reads", [True, False])
def test_uncertain_create_that_failed_is_retried_once(reads: bool) -> None:
    service = FakeService(reads=reads)
    service.faults.append(("create", drop(), False))
    report, _ = run(Plan(operations=(op("create_attribute"),)), service)
    assert report.ok
    assert service.calls.count("create") == 2
    assert service.attributes["b1"]["tier"]["label"] == "Tier"


def test_create_refused_for_certain_is_a_failure_not_a_retry() -> None:
    service = FakeService()
    service.attributes["b1"] = {"tier": dict(ATTR)}
    report, _ = run(Plan(operations=(op("create_attribute"),)), service)
    assert not report.ok
    assert "already exists" in report.results[0].message
    assert service.calls == ["create"]


def ensure(name: str, managed: dict[str, Any]) -> Operation:
    create = {"name": name, "type": "text", "label": name, "archived": False}
    record = {"name": name, "type": "text", **managed}
    return operation("ensure_attribute", name, managed, record=record, ref=ref(), fallback=create)


def test_ensure_updates_managed_fields_when_it_exists_and_creates_on_404() -> None:
    service = FakeService(reads=False)
    service.attributes["b1"] = {"tier": {**ATTR, "label": "Set in the dashboard"}}
    # The YAML declares no label: the probe must not overwrite the dashboard's one.
    plan = Plan(
        operations=(ensure("tier", {"archived": True}), ensure("other", {"archived": False}))
    )
    report, _ = run(plan, service)
    assert report.ok
    assert service.attributes["b1"]["tier"]["label"] == "Set in the dashboard"
    assert service.attributes["b1"]["tier"]["archived"] is True
    assert service.attributes["b1"]["other"]["label"] == "other"  # created whole
    assert service.calls == ["update", "create", "update"]  # "other" (404 -> create), "tier"


def test_one_bot_failing_does_not_stop_others_and_skips_its_rest() -> None:
    service = FakeService()
    service.faults.append(
        ("settings", ApiError("update settings", 400, "Invalid request data"), False)
    )
    plan = Plan(
        operations=(
            op("update_settings", "b1", "settings"),
            op("create_attribute", "b1"),
            op("create_attribute", "b2"),
        )
    )
    report, seen = run(plan, service)
    statuses = {(r.operation.bot.chatbot_id, r.operation.kind): r.status for r in report.results}
    assert statuses == {
        ("b1", "update_settings"): "failed",
        ("b1", "create_attribute"): "not_attempted",
        ("b2", "create_attribute"): "applied",
    }
    assert len(seen) == 3
    assert [r.operation for r in report.results] == list(plan.operations)  # plan order


class GatedService(FakeService):
    """Settings updates wait until the test lets them through: work "in flight"."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self.release = asyncio.Event()

    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None:
        self.started.append(chatbot_id)
        await self.release.wait()
        await super().update_settings(chatbot_id, fields)


def three_bots() -> Plan:
    ops = [op(kind, f"b{i}") for i in range(3) for kind in ("update_settings", "create_attribute")]
    return Plan(operations=tuple(ops))


async def interrupted_run(
    service: GatedService, stop: Stop, *, requests: int, release: bool
) -> ApplyReport:
    """Two chatbots in flight (parallelism 2) when the stop is requested."""
    seen: list[OpResult] = []
    run = asyncio.ensure_future(
        apply_plan(three_bots(), {"KEY": service}, on_result=seen.append, parallelism=2, stop=stop)
    )
    while len(service.started) < 2:
        await asyncio.sleep(0)
    for _ in range(requests):
        stop.request(15)
    if release:
        service.release.set()
    report = await run
    assert sorted(map(id, seen)) == sorted(map(id, report.results))  # every outcome reported
    return report


def statuses(report: ApplyReport) -> list[tuple[str, str, str]]:
    return [(r.operation.bot.chatbot_id, r.operation.kind, r.status) for r in report.results]


def test_a_stop_lets_work_in_flight_finish_and_starts_nothing_more() -> None:
    service = GatedService()
    report = asyncio.run(interrupted_run(service, Stop(), requests=1, release=True))
    assert statuses(report) == [
        ("b0", "update_settings", "applied"),
        ("b0", "create_attribute", "not_attempted"),
        ("b1", "update_settings", "applied"),
        ("b1", "create_attribute", "not_attempted"),
        ("b2", "update_settings", "not_attempted"),
        ("b2", "create_attribute", "not_attempted"),
    ]
    assert service.started == ["b0", "b1"]
    assert all(r.message == INTERRUPTED for r in report.results if r.status == "not_attempted")


@pytest.mark.parametrize(
    ("stop", "requests"),
    [(Stop(), 2), (Stop(drain_timeout=0), 1)],
    ids=["second request", "drain timed out"],
)
def test_work_in_flight_is_abandoned_by_a_second_request_or_the_drain_timeout(
    stop: Stop, requests: int
) -> None:
    service = GatedService()
    report = asyncio.run(interrupted_run(service, stop, requests=requests, release=False))
    assert statuses(report)[:2] == [
        ("b0", "update_settings", "failed"),
        ("b0", "create_attribute", "not_attempted"),
    ]
    assert report.count("failed") == 2
    assert report.count("not_attempted") == 4
    failed = [r for r in report.results if r.status == "failed"]
    assert all("abandoned in flight" in r.message for r in failed)
    assert all("may have been applied" in r.message for r in failed)
    assert service.settings == {}  # abandoned before they were made


def test_when_recording_an_outcome_raises_no_other_chatbot_goes_on_sending() -> None:
    """``on_result`` raising (the state writer lost its compare-and-swap, the agent its lease)
    ends the apply: the other chatbots' work is cancelled, not left sending on its own."""
    service = GatedService()

    def record(result: OpResult) -> None:
        raise LeaseLostForTest(f"cannot record {result.operation.label}")

    async def go() -> None:
        run = asyncio.ensure_future(
            apply_plan(three_bots(), {"KEY": service}, on_result=record, parallelism=1)
        )
        while not service.started:
            await asyncio.sleep(0)
        service.release.set()
        with pytest.raises(LeaseLostForTest):
            await run
        for _ in range(20):  # whatever was left running would have started meanwhile
            await asyncio.sleep(0)

    asyncio.run(go())
    assert service.started == ["b0"]
    assert service.calls == ["settings"]


class LeaseLostForTest(Exception):
    pass
