"""A resource kind is one module behind one interface: a toy kind defined only here (its model,
its kind, a fake endpoint added to the sandbox's app from this test) goes through live reads,
plan, apply, the state file, read-back, a saved plan's freshness check, drift and every render
format, with no edit to ``src/``.

The toy: each chatbot has *widgets*, a name and a colour each, read with
``GET /chatbots/{id}/widgets`` and written with ``PUT /chatbots/{id}/widgets/{name}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from botctl import contract
from botctl.errors import ReadsUnavailable, StalePlanError, StateError
from botctl.models import BotSpec, Desired, Live, State
from botctl.plan import (
    BotRef,
    Change,
    Confidence,
    Dependency,
    Operation,
    Plan,
    Unmanaged,
)
from botctl.reconcile import baseline
from botctl.reconcile.apply import ApplyReport, OpResult, apply_plan
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import compute_drift
from botctl.reconcile.freshness import check_fresh, verify_applied
from botctl.render import DRIFT_RENDERERS, PLAN_RENDERERS, render_drift, render_plan
from botctl.resources.base import BotPlan
from botctl.resources.kind import Basis, MutableParts, Parts
from botctl.resources.registry import kind_of, kinds, register, unregister
from botctl.sandbox.server import RunningSandbox
from botctl.sealing import FingerprintKey
from botctl.service.client import ServiceClient, path_segment
from botctl.service.live import read_live
from botctl.store.planfile import read_plan_file, write_plan_file
from botctl.store.state import StateWriter, load_state
from botctl.values import JsonValue

KEY_ENV = "BOTCTL_API_KEY"
KEY = "test-key"
BOT = "bot-1"

# --- the toy kind: its model and its kind, nothing else -------------------------------------------


class Widget(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    colour: str


class WidgetKind:
    """Widgets behind ``ResourceKind``. Parts: ``widgets`` (declared: a tuple; live and
    recorded: by name) and, in a record, ``verified_widgets``."""

    name = "widget"
    order = 100  # after every kind of src/
    operation_kinds = ("put_widget",)
    item_detail = False
    state_keys = ("widgets", "verified_widgets")
    absent_shown = "absent"

    async def read_live(
        self, client: Any, chatbot_id: str, listed: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        path = f"/chatbots/{path_segment(chatbot_id)}/widgets"
        try:
            body = await client.request("GET", path, "read widgets", "read", chatbot_id=chatbot_id)
        except ReadsUnavailable:
            return {}
        return {"widgets": {w["name"]: Widget.model_validate(w) for w in body["data"]}}

    def secret_locations(self, spec: Parts, secrets: frozenset[str]) -> set[str]:
        return set()

    def unseal(
        self, record: Parts, spec: Parts, live: Parts | None, key: FingerprintKey
    ) -> dict[str, Any]:
        return {}

    def plan(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        *,
        secrets: frozenset[str],
        reassert: bool,
        out: BotPlan,
    ) -> None:
        observed = live.part("widgets") if live is not None else None
        recorded = _recorded(record)
        declared = spec.part("widgets") or ()
        for widget in declared:
            current: Widget | None
            confidence: Confidence
            if observed is not None:
                current, confidence = observed.get(widget.name), "verified"
                before = current.model_dump() if current is not None else None
                out.depends_on.append(Dependency(bot.chatbot_id, self.name, widget.name, before))
            elif widget.name in recorded:
                current, confidence = recorded[widget.name], "assumed"
            else:
                current, confidence = None, "unknown"
            if confidence != "verified":
                out.unverified += 1
            if current is not None and current.colour == widget.colour:
                continue
            change = Change(
                resource=self.name,
                path=widget.name,
                action="create" if current is None else "update",
                before=current.model_dump() if current is not None else None,
                after=widget.model_dump(),
                confidence=confidence,
            )
            body: dict[str, JsonValue] = {"colour": widget.colour}
            out.operations.append(
                Operation(bot, "put_widget", widget.name, body, widget.model_dump(), (change,))
            )
        names = {widget.name for widget in declared}
        for name in sorted(set(observed or {}) - names - set(recorded)):
            out.unmanaged.append(Unmanaged(bot, name, resource=self.name))

    def premises(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        secrets: frozenset[str],
    ) -> list[Dependency]:
        if live is not None and live.part("widgets") is not None:
            return []
        recorded = _recorded(record)
        return [
            Dependency(bot.chatbot_id, self.name, w.name, _json(recorded.get(w.name)), "state")
            for w in spec.part("widgets") or ()
        ]

    async def send(self, op: Operation, client: Any) -> str:
        path = f"/chatbots/{path_segment(op.bot.chatbot_id)}/widgets/{path_segment(op.subject)}"
        await client.request(
            "PUT",
            path,
            f"put widget {op.subject}",
            "idempotent",
            chatbot_id=op.bot.chatbot_id,
            body=dict(op.body),
        )
        return "widget painted"

    def fold(self, record: MutableParts, op: Operation) -> None:
        widgets = dict(_recorded(record))
        widgets[op.subject] = Widget.model_validate(op.state_record)
        record.set_part("widgets", widgets)
        record.set_part("verified_widgets", _verified(record) - {op.subject})

    def read_back_notes(self, op: Operation, live: Parts) -> list[str]:
        observed = live.part("widgets")
        now = observed.get(op.subject) if observed is not None else None
        if observed is None or (now is not None and now.model_dump() == op.state_record):
            return []
        return [f"{op.bot.name}: widget {op.subject} reads back as {_json(now)}"]

    def matching(self, spec: Parts, live: Parts) -> dict[str, Any]:
        observed = live.part("widgets") or {}
        return {w.name: w for w in spec.part("widgets") or () if observed.get(w.name) == w}

    def read_back(self, op: Operation, live: Parts) -> dict[str, Any]:
        observed = live.part("widgets") or {}
        now = observed.get(op.subject)
        return {op.subject: now} if now is not None and now.model_dump() == op.state_record else {}

    def observed(self, live: Parts) -> dict[str, Any]:
        return dict(live.part("widgets") or {})

    def record_verified(self, record: MutableParts, values: Mapping[str, Any]) -> bool:
        before = (_recorded(record), _verified(record))
        record.set_part("widgets", {**_recorded(record), **values})
        record.set_part("verified_widgets", _verified(record) | set(values))
        return before != (_recorded(record), _verified(record))

    def current_value(self, live: Parts, path: str) -> JsonValue:
        return _json((live.part("widgets") or {}).get(path))

    def recorded_value(self, record: Parts, path: str) -> JsonValue:
        return _json(_recorded(record).get(path))

    def drift_values(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue, Basis | None]:
        declared = next((w for w in spec.part("widgets") or () if w.name == change.path), None)
        now, want = self.current_value(live, change.path), _json(declared)
        kept = _recorded(record).get(change.path)
        if kept is None:
            return now, want, None, None
        basis: Basis = "verified" if change.path in _verified(record) else "sent"
        return now, want, _json(kept), basis

    def drift_shown(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue]:
        now, want, recorded, _ = self.drift_values(spec, change, live, record)
        return now, want, recorded

    def unmanaged_value(self, live: Parts | None, name: str) -> JsonValue:
        return _json((live.part("widgets") or {}).get(name)) if live is not None else None

    def render_lines(self, change: Change, show: Callable[[JsonValue], str]) -> list[str] | None:
        before = change.before if isinstance(change.before, dict) else {}
        after = change.after if isinstance(change.after, dict) else {}
        return [f"colour: {show(before.get('colour'))} -> {show(after.get('colour'))}"]

    def dump(
        self, record: Parts, seal: Callable[[str, JsonValue], JsonValue]
    ) -> dict[str, JsonValue]:
        widgets = _recorded(record)
        if not widgets:
            return {}
        return {
            "widgets": {name: widgets[name].model_dump() for name in sorted(widgets)},
            "verified_widgets": sorted(_verified(record)),
        }

    def load(self, document: Mapping[str, Any]) -> dict[str, Any]:
        try:
            widgets = {
                name: Widget.model_validate(w) for name, w in document.get("widgets", {}).items()
            }
        except ValidationError as exc:
            raise ValueError(f"widgets: {exc.errors()[0]['msg']}") from None
        return {"widgets": widgets, "verified_widgets": set(document.get("verified_widgets", ()))}


def _recorded(record: Parts | None) -> dict[str, Widget]:
    found = record.part("widgets") if record is not None else None
    return dict(found or {})


def _verified(record: Parts | None) -> set[str]:
    found = record.part("verified_widgets") if record is not None else None
    return set(found or ())


def _json(widget: Widget | None) -> JsonValue:
    return widget.model_dump() if widget is not None else None


# --- the fake endpoint, added to the sandbox's app ------------------------------------------------


class WidgetService:
    """The widgets the sandbox holds, per chatbot, and the routes that serve them."""

    def __init__(self) -> None:
        self.widgets: dict[str, dict[str, str]] = {}
        self.puts: list[tuple[str, str, dict[str, Any]]] = []

    async def listing(self, request: Request) -> Response:
        chatbot_id = request.path_params["chatbot_id"]
        held = self.widgets.get(chatbot_id, {})
        data = [{"name": name, "colour": colour} for name, colour in sorted(held.items())]
        return JSONResponse({"data": data})

    async def put(self, request: Request) -> Response:
        chatbot_id, name = request.path_params["chatbot_id"], request.path_params["name"]
        body = await request.json()
        self.puts.append((chatbot_id, name, body))
        self.widgets.setdefault(chatbot_id, {})[name] = body["colour"]
        return JSONResponse({"data": {"name": name, "colour": body["colour"]}})

    def routes(self) -> list[Route]:
        prefix = f"{contract.API_PREFIX}/chatbots/{{chatbot_id}}/widgets"
        return [
            Route(prefix, self.listing, methods=["GET"]),
            Route(f"{prefix}/{{name}}", self.put, methods=["PUT"]),
        ]


@pytest.fixture
def widget_kind() -> Iterator[WidgetKind]:
    kind = WidgetKind()
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.name)


@pytest.fixture
def widgets(sandbox: RunningSandbox) -> WidgetService:
    service = WidgetService()
    sandbox.app.router.routes[0:0] = service.routes()
    admin = httpx.post(
        f"{sandbox.url}/_sandbox/chatbots", json={"id": BOT, "account": KEY}, timeout=10
    )
    assert admin.status_code < 300, admin.text
    return service


# --- the run --------------------------------------------------------------------------------------


def _desired(colour: str) -> Desired:
    spec = BotSpec(
        name="support",
        chatbot_id=BOT,
        api_key_env=KEY_ENV,
        parts={"widgets": (Widget(name="banner", colour=colour),)},
    )
    return Desired(bots=(spec,), declared_ids=frozenset({BOT}))


def _read(sandbox: RunningSandbox, desired: Desired) -> Live:
    async def read() -> Live:
        async with ServiceClient(sandbox.api_url, KEY) as client:
            return await read_live(desired.bots, {KEY_ENV: client}, concurrency=4)

    return asyncio.run(read())


def _apply(sandbox: RunningSandbox, plan: Plan, state: State, path: Path) -> list[OpResult]:
    results: list[OpResult] = []
    writer = StateWriter(state, path)

    def on_result(result: OpResult) -> None:
        results.append(result)
        if result.status == "applied":
            writer.record(result.operation)

    async def run() -> None:
        async with ServiceClient(sandbox.api_url, KEY) as client:
            await apply_plan(plan, {KEY_ENV: client}, on_result=on_result, parallelism=2)

    try:
        asyncio.run(run())
    finally:
        writer.close()
    return results


def _rendered_plans(plan: Plan) -> dict[str, str]:
    return {name: render_plan(plan, name) for name in PLAN_RENDERERS}


def test_the_registry_holds_the_toy_kind_only_while_registered(widget_kind: WidgetKind) -> None:
    assert kind_of("widget") is widget_kind
    assert kinds()[-1] is widget_kind
    unregister("widget")
    assert "widget" not in [kind.name for kind in kinds()]
    with pytest.raises(ValueError, match="unknown resource kind 'widget'"):
        kind_of("widget")
    register(widget_kind)  # for the fixture's own unregister


def test_a_kind_defined_only_in_a_test_goes_through_every_step(
    sandbox: RunningSandbox, widgets: WidgetService, widget_kind: WidgetKind, tmp_path: Path
) -> None:
    widgets.widgets[BOT] = {"legacy": "grey"}  # made on the dashboard: not botctl's
    state_path = tmp_path / "state.json"
    desired = _desired("red")

    # Live reads and the plan: a create, verified; the stray widget is unmanaged.
    live = _read(sandbox, desired)
    assert live.bots[BOT].part("widgets") == {"legacy": Widget(name="legacy", colour="grey")}
    plan = compute_plan(desired, live, State())
    assert [(op.kind, op.subject, op.resource) for op in plan.operations] == [
        ("put_widget", "banner", "widget")
    ]
    (change,) = plan.operations[0].changes
    assert (change.action, change.confidence, change.after) == (
        "create",
        "verified",
        {"name": "banner", "colour": "red"},
    )
    assert [(u.name, u.resource) for u in plan.unmanaged] == [("legacy", "widget")]

    # Every render format shows it.
    shown = _rendered_plans(plan)
    assert "+ create widget banner  (verified)" in shown["text"]
    assert 'colour: (none) -> "red"' in shown["text"]
    assert "? unmanaged widget legacy" in shown["text"]
    document = json.loads(shown["json"])
    assert document["changes"][0]["resource"] == "widget"
    assert document["changes"][0]["key"] == "banner"
    assert document["unmanaged"] == [{"chatbotId": BOT, "bot": "support", "name": "legacy"}]
    assert "`banner`" in shown["markdown"]
    assert "  + create widget banner  (verified)" in shown["github"]

    # A saved plan keeps the kind's operations; apply sends the one read back.
    write_plan_file(plan, tmp_path / "plan.json")
    saved = read_plan_file(tmp_path / "plan.json").plan
    assert saved.operations == plan.operations
    assert saved.unmanaged == plan.unmanaged

    # Apply: the request goes out, the state records it.
    state = load_state(state_path)
    results = _apply(sandbox, saved, state, state_path)
    assert [(r.status, r.message) for r in results] == [("applied", "widget painted")]
    assert widgets.puts == [(BOT, "banner", {"colour": "red"})]

    # Read back: as sent, so no note, and recorded as verified.
    after = _read(sandbox, desired)
    report = ApplyReport(tuple(results))
    assert verify_applied(report, after) == []
    for found in baseline.read_back(report, after):
        assert state.record_verified(found.bot, found.values)
    writer = StateWriter(state, state_path)
    writer.touched(BOT)
    writer.close()

    # The state file keeps the kind's records under its own keys, and reads them back.
    written = json.loads(state_path.read_text(encoding="utf-8"))
    assert written["bots"][BOT]["widgets"] == {"banner": {"name": "banner", "colour": "red"}}
    assert written["bots"][BOT]["verified_widgets"] == ["banner"]
    loaded = load_state(state_path)
    record = loaded.record_for(BOT)
    assert record is not None
    assert record.part("widgets") == {"banner": Widget(name="banner", colour="red")}
    assert record.part("verified_widgets") == {"banner"}

    # In sync now: nothing to send, no drift but the unmanaged widget.
    assert compute_plan(desired, after, loaded).empty
    drift = compute_drift(desired, after, loaded)
    assert [(i.drift_class, i.resource, i.path) for i in drift.items] == [
        ("unmanaged", "widget", "legacy")
    ]

    # A saved plan relied on what the service held: stale once it moved.
    pending = compute_plan(_desired("green"), after, loaded)
    check_fresh(pending, after, loaded, loaded.known_fingerprint_key())
    widgets.widgets[BOT]["banner"] = "blue"  # a dashboard edit
    moved = _read(sandbox, desired)
    with pytest.raises(StalePlanError, match="bot-1 widget banner"):
        check_fresh(pending, moved, loaded, loaded.known_fingerprint_key())

    # Drift: changed outside, against the verified record, in every format.
    drift = compute_drift(desired, moved, loaded)
    (item,) = [i for i in drift.items if i.drift_class == "changed_outside"]
    assert (item.resource, item.path, item.basis) == ("widget", "banner", "verified")
    assert item.live == {"name": "banner", "colour": "blue"}
    assert item.last_applied == {"name": "banner", "colour": "red"}
    text = render_drift(drift, "text")
    assert 'widget banner: recorded {"colour": "red"} (verified), now {"colour": "blue"}' in text
    assert "? widget legacy" in text
    report_json = json.loads(render_drift(drift, "json"))
    assert report_json["changed_outside"][0]["resource"] == "widget"
    assert report_json["unmanaged"] == [{"chatbotId": BOT, "bot": "support", "name": "legacy"}]
    for name in DRIFT_RENDERERS:
        assert "banner" in render_drift(drift, name), name


def test_a_malformed_record_of_the_kind_is_a_located_state_error(
    widget_kind: WidgetKind, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    document = {
        "format_version": 3,
        "lineage": "00000000-0000-4000-8000-000000000000",
        "serial": 1,
        "salt": "0" * 64,
        "bots": {BOT: {"bot": "support", "widgets": {"banner": {"name": "banner"}}}},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StateError, match=r"bots\.bot-1\.widgets: Field required"):
        load_state(path)
