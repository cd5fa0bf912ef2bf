"""A resource kind is one module behind one interface: a toy kind defined only here (its model,
its kind, a fake endpoint added to the sandbox's app from this test) goes through its YAML
section (with a Defaults document and a ``${secret:...}``), validation, live reads, plan,
apply, the state file (its fingerprints), read-back, a saved plan's freshness check, drift,
every render format, ``botctl render``, ``botctl export`` and ``botctl state rekey``, with no
edit to ``src/``.

The toy: each chatbot has *widgets*, a name and a colour each, declared under ``spec.widgets``,
read with ``GET /chatbots/{id}/widgets`` and written with ``PUT /chatbots/{id}/widgets/{name}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from botctl import contract
from botctl.config.loader import load_fleet
from botctl.errors import ConfigError, ReadsUnavailable, StalePlanError, StateError
from botctl.models import Desired, Live, State
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
from botctl.resources.base import BotPlan, known_value, rekeyed
from botctl.resources.kind import (
    Basis,
    ExportedSection,
    MutableParts,
    Parts,
    SpecField,
    SpecPath,
)
from botctl.resources.registry import kind_of, kinds, register, unregister
from botctl.sandbox.server import RunningSandbox
from botctl.sealing import FingerprintKey, Sealed, encode, holds_secret, mask_beside, sealed_of
from botctl.service.client import ServiceClient, path_segment
from botctl.service.live import read_live
from botctl.store.planfile import read_plan_file, write_plan_file
from botctl.store.state import StateWriter, load_state
from botctl.values import SECRET_MASK, JsonValue, mask_secrets
from tests.e2e_support import Bench

KEY_ENV = "BOTCTL_API_KEY"
KEY = "test-key"
BOT = "bot-1"

# --- the toy kind: its model and its kind, nothing else -------------------------------------------


class Widget(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    colour: str


def _location(name: str) -> str:
    return f"widget:{name}:colour"


class WidgetKind:
    """Widgets behind ``ResourceKind``. Parts: ``widgets`` (declared: a tuple; live and
    recorded: by name), and in a record ``verified_widgets`` and ``sealed_widgets`` (a colour
    that held a secret, known only by its fingerprint: its widget is then not in
    ``widgets``). A Chatbot document declares ``spec.widgets``; a Defaults document may give
    them (laid under the chatbot's own); a colour may hold a ``${secret:...}``."""

    name = "widget"
    order = 100  # after every kind of src/
    operation_kinds = ("put_widget",)
    item_detail = False
    state_keys = ("widgets", "verified_widgets")
    absent_shown = "absent"
    spec_fields: Mapping[str, SpecField] = {
        "widgets": SpecField(
            tuple[Widget, ...],
            Field(default=(), description="The chatbot's widgets."),
            defaults=(tuple[Widget, ...] | None, Field(default=None)),
        )
    }
    secret_places = "a widget's colour"

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
        return {
            _location(w.name) for w in spec.part("widgets") or () if holds_secret(w.colour, secrets)
        }

    def unseal(
        self, record: Parts, spec: Parts, live: Parts | None, key: FingerprintKey
    ) -> dict[str, Any]:
        sealed = _sealed(record)
        if not sealed:
            return {}
        declared = {w.name: w.colour for w in spec.part("widgets") or ()}
        seen = (live.part("widgets") if live is not None else None) or {}
        widgets = _recorded(record)
        for name, fingerprint in sealed.items():
            held = seen[name].colour if name in seen else None
            known = known_value(fingerprint, key, declared.get(name), held)
            widgets[name] = Widget(name=name, colour=str(known or SECRET_MASK))
        return {"widgets": widgets, "sealed_widgets": {}}

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
                secret = holds_secret(widget.colour, secrets)
                dep = Dependency(bot.chatbot_id, self.name, widget.name, before, secret=secret)
                out.depends_on.append(dep)
            elif widget.name in recorded:
                current, confidence = recorded[widget.name], "assumed"
            else:
                current, confidence = None, "unknown"
            if confidence != "verified":
                out.unverified += 1
            if current is not None and current.colour == widget.colour:
                continue
            after = widget.model_dump()
            change = Change(
                resource=self.name,
                path=widget.name,
                action="create" if current is None else "update",
                before=mask_beside(_json(current), after, secrets),
                after=mask_secrets(after, secrets),
                confidence=confidence,
            )
            body: dict[str, JsonValue] = {"colour": widget.colour}
            out.operations.append(Operation(bot, "put_widget", widget.name, body, after, (change,)))
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
        widgets = _recorded(record)
        widgets[op.subject] = Widget.model_validate(op.state_record)
        record.set_part("widgets", widgets)
        record.set_part("verified_widgets", _verified(record) - {op.subject})
        record.set_part(
            "sealed_widgets", {n: s for n, s in _sealed(record).items() if n != op.subject}
        )

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
        before = (_recorded(record), _verified(record), _sealed(record))
        record.set_part("widgets", {**_recorded(record), **values})
        record.set_part("verified_widgets", _verified(record) | set(values))
        record.set_part("sealed_widgets", {n: s for n, s in before[2].items() if n not in values})
        return before != (_recorded(record), _verified(record), _sealed(record))

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
        widgets, sealed = _recorded(record), _sealed(record)
        if not widgets and not sealed:
            return {}
        written: dict[str, JsonValue] = {
            name: {"name": name, "colour": seal(_location(name), widgets[name].colour)}
            for name in widgets
        }
        written |= {name: {"name": name, "colour": encode(s)} for name, s in sealed.items()}
        return {
            "widgets": dict(sorted(written.items())),
            "verified_widgets": sorted(_verified(record)),
        }

    def load(self, document: Mapping[str, Any]) -> dict[str, Any]:
        widgets: dict[str, Widget] = {}
        sealed: dict[str, Sealed] = {}
        try:
            for name, w in document.get("widgets", {}).items():
                fingerprint = sealed_of(w.get("colour")) if isinstance(w, dict) else None
                if fingerprint is not None:
                    sealed[name] = fingerprint
                else:
                    widgets[name] = Widget.model_validate(w)
        except ValidationError as exc:
            raise ValueError(f"widgets: {exc.errors()[0]['msg']}") from None
        verified = set(document.get("verified_widgets", ()))
        return {"widgets": widgets, "verified_widgets": verified, "sealed_widgets": sealed}

    def has_sealed(self, record: Parts) -> bool:
        return bool(_sealed(record))

    def rekey(
        self,
        record: MutableParts,
        spec: Parts | None,
        old: FingerprintKey | None,
        new: FingerprintKey,
    ) -> tuple[int, list[str]]:
        declared = {w.name: w.colour for w in (spec.part("widgets") or ())} if spec else {}
        kept: dict[str, Sealed] = {}
        forgotten = []
        for name, fingerprint in sorted(_sealed(record).items()):
            value = rekeyed(fingerprint, old, declared.get(name))
            if value is None:
                forgotten.append(f"widget {name}")
                record.set_part("verified_widgets", _verified(record) - {name})
            else:
                kept[name] = new.seal(value)
        record.set_part("sealed_widgets", kept)
        return len(kept), forgotten

    def previous(self, live: Parts | None, record: Parts | None) -> Any:
        return None  # never rolled back

    def restore(
        self, op: Operation, previous: Any
    ) -> tuple[Operation | None, list[tuple[str, str]]]:
        return None, []

    def stranded(self, spec: Parts, live: Parts | None) -> list[str]:
        return []

    def archive_consent(self, spec: Parts) -> set[str]:
        return set()

    def reads_contacts(self, op: Operation) -> bool:
        return False

    def may_hold_secret(self, path: SpecPath) -> bool:
        return len(path) == 3 and path[0] == "widgets" and path[2] == "colour"

    def from_spec(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"widgets": values["widgets"]}

    def section(self, spec: Parts) -> dict[str, JsonValue]:
        return {"widgets": [w.model_dump() for w in spec.part("widgets") or ()]}

    def revision_values(self, spec: Parts) -> dict[str, JsonValue]:
        declared = spec.part("widgets") or ()
        return {"widgets": [w.model_dump() for w in declared]} if declared else {}

    def export(self, live: Parts) -> ExportedSection:
        held = live.part("widgets")
        if held is None:
            return ExportedSection(
                {}, ("The widget list could not be read: widgets not exported.",)
            )
        widgets = [held[name].model_dump() for name in sorted(held)]
        return ExportedSection({"widgets": widgets} if widgets else {})


def _recorded(record: Parts | None) -> dict[str, Widget]:
    found = record.part("widgets") if record is not None else None
    return dict(found or {})


def _verified(record: Parts | None) -> set[str]:
    found = record.part("verified_widgets") if record is not None else None
    return set(found or ())


def _sealed(record: Parts | None) -> dict[str, Sealed]:
    found = record.part("sealed_widgets") if record is not None else None
    return dict(found or {})


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


def _desired(tmp_path: Path, colour: str) -> Desired:
    """The configuration, as YAML and loaded as every command loads it."""
    folder = tmp_path / f"config-{colour}"
    folder.mkdir()
    (folder / "support.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Chatbot\nmetadata:\n  name: support\nspec:\n"
        f"  chatbotId: {BOT}\n  widgets:\n    - {{name: banner, colour: {colour}}}\n",
        encoding="utf-8",
    )
    return load_fleet([folder], environ={}).desired


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
    desired = _desired(tmp_path, "red")

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
    pending = compute_plan(_desired(tmp_path, "green"), after, loaded)
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


# --- through the command line: YAML -> plan -> apply -> state -> render -> export -> rekey ----

SECRET = "crimson-for-the-launch"
OLD_KEY = {"BOTCTL_STATE_KEY": "bsk1_old-key-of-the-toy-test"}
NEW_KEY = {"BOTCTL_STATE_KEY": "bsk1_new-key-of-the-toy-test"}
SUPPORT = """\
apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: support
spec:
  chatbotId: bot-1
  widgets:
    - {name: banner, colour: "${secret:BANNER_COLOUR}"}
"""
SALES = """\
apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: sales
  labels: {team: sales}
spec:
  chatbotId: bot-2
---
apiVersion: botctl/v1
kind: Defaults
metadata:
  name: sales-widgets
spec:
  selector: {matchLabels: {team: sales}}
  widgets:
    - {name: footer, colour: grey}
"""


@pytest.fixture
def bench(sandbox: RunningSandbox, widgets: WidgetService, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.env = {"BANNER_COLOUR": SECRET, **OLD_KEY}
    b.create_bot("bot-2", settings={"name": "Sales"})
    b.write("support.yaml", SUPPORT)
    b.write("sales.yaml", SALES)
    return b


def _plan(bench: Bench, folder: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = bench.run("plan", "--format", "json", str(folder), env=env)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    return dict(json.loads(result.stdout))


def test_the_kind_goes_from_yaml_to_rekey_through_the_cli(
    bench: Bench, widgets: WidgetService, widget_kind: WidgetKind
) -> None:
    cfg = bench.config_dir
    assert bench.run("validate", str(cfg)).exit_code == 0

    # The plan: the chatbot's own widget (its colour a secret, masked) and the Defaults'.
    planned = _plan(bench, cfg)
    shown = {(c["bot"], c["resource"], c["key"]): c["after"] for c in planned["changes"]}
    assert shown == {
        ("support", "widget", "banner"): {"name": "banner", "colour": SECRET_MASK},
        ("sales", "widget", "footer"): {"name": "footer", "colour": "grey"},
    }

    # Apply sends them; the state keeps the secret colour only as its fingerprint.
    applied = bench.run("apply", "--auto-approve", str(cfg))
    assert applied.exit_code == 0, applied.output
    assert sorted(widgets.puts) == [
        ("bot-1", "banner", {"colour": SECRET}),
        ("bot-2", "footer", {"colour": "grey"}),
    ]
    text = bench.state_path.read_text(encoding="utf-8")
    assert SECRET not in text
    state = json.loads(text)
    old = FingerprintKey(state["salt"], OLD_KEY["BOTCTL_STATE_KEY"].encode())
    banner = state["bots"]["bot-1"]["widgets"]["banner"]
    assert banner["colour"] == {"$sealed": old.fingerprint(SECRET)}
    assert state["bots"]["bot-2"]["widgets"]["footer"] == {"name": "footer", "colour": "grey"}
    assert _plan(bench, cfg)["changes"] == []  # the fingerprint compares: in sync

    # `botctl render` shows the kind's section, each widget from where it came.
    rendered = bench.run("render", "--format", "json", str(cfg))
    assert rendered.exit_code == 0, rendered.output
    sales = next(c for c in json.loads(rendered.stdout)["chatbots"] if c["name"] == "sales")
    assert sales["document"]["spec"]["widgets"] == [{"name": "footer", "colour": "grey"}]
    assert sales["origins"]["spec.widgets[0]"]["kind"] == "Defaults"

    # Export writes the kind's section; the exported document validates and is in sync.
    out = bench.workdir / "exported"
    exported = bench.run("export", "bot-2", "--out", str(out), "--state", str(bench.state_path))
    assert exported.exit_code == 0, exported.output
    assert "widgets:\n  - name: footer\n    colour: grey\n" in (out / "sales.yaml").read_text()
    assert bench.run("validate", str(out)).exit_code == 0
    assert _plan(bench, out)["changes"] == []

    # Rekey moves the kind's fingerprint to the new key; in sync under it.
    both = {**NEW_KEY, "BOTCTL_OLD_STATE_KEY": OLD_KEY["BOTCTL_STATE_KEY"]}
    moved = bench.run("state", "rekey", "--state", str(bench.state_path), str(cfg), env=both)
    assert moved.exit_code == 0, moved.output
    assert "1 fingerprint(s) now under" in moved.stdout
    state = json.loads(bench.state_path.read_text(encoding="utf-8"))
    new = FingerprintKey(state["salt"], NEW_KEY["BOTCTL_STATE_KEY"].encode())
    banner = state["bots"]["bot-1"]["widgets"]["banner"]
    assert banner["colour"] == {"$sealed": new.fingerprint(SECRET)}
    assert _plan(bench, cfg, NEW_KEY)["changes"] == []


def test_the_kind_s_yaml_errors_are_located_like_any_other(
    widget_kind: WidgetKind, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Chatbot\nmetadata:\n  name: support\nspec:\n"
        "  chatbotId: bot-1\n  widgets:\n    - {name: banner}\n"
        "    - {name: badge, colour: red, shape: round}\n"
        "  settings:\n    name: ${secret:BANNER_COLOUR}x\n"
        "  customAttributes:\n    - {name: tier, type: text}\n"
        "---\napiVersion: botctl/v1\nkind: Chatbot\nmetadata:\n  name: other\nspec:\n"
        "  chatbotId: bot-2\n  prune: ${secret:BANNER_COLOUR}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        load_fleet([tmp_path], environ={"BANNER_COLOUR": SECRET})
    lines = [line.split("bad.yaml:", 1)[-1] for line in str(raised.value).splitlines()]
    assert lines[:3] == [
        "8:7: missing required key 'colour'",  # a widget without one
        "9:34: unknown key 'shape'",  # a key the kind's model does not have
        "21:10: ${secret:...} may only be used in spec.settings or in an attribute's label or "
        "description or in a widget's colour: elsewhere the value is a name or an id, shown in "
        "every plan and kept in the state",
    ]
