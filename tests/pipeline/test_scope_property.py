"""Honest equivalence of change-scoped planning (``pipeline.scope``), as a property over
generated fleets and edits: settings, own attributes, an AttributeSet, a Defaults selector,
labels, deleted documents, a chatbotId change, documents moved between files.

The world: a base configuration, applied (its plan's operations folded into the state, the
service holding what was sent), except for chatbots whose apply was cut short (nothing or
only part recorded), and with dashboard edits on some chatbots (drift). Then the edits make
the configuration of HEAD. For every chatbot:

- in scope: the scoped plan says exactly what the full plan says for it;
- out of scope: the full plan has no ``verified`` or ``assumed`` change but the drift the
  test itself made on the service.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botctl.config.loader import load_fleet_from
from botctl.models import BotSpec, Live, LiveBot, State
from botctl.pipeline.scope import scope_between
from botctl.plan import Plan
from botctl.reconcile.diff import compute_plan
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import ChatbotSettings

ATTRIBUTE_TYPES = {"tier": "text", "seats": "number", "vip": "boolean", "renews": "date"}
SET_ATTRIBUTES = ("crm_a", "crm_b")
TIERS = ("gold", "free")


def chatbot(i: int, draw: Any) -> dict[str, Any]:
    own = draw(st.lists(st.sampled_from(sorted(ATTRIBUTE_TYPES)), unique=True, max_size=3))
    spec: dict[str, Any] = {
        "chatbotId": f"id-{i}",
        "settings": {
            "name": f"Bot {i}",
            "temp": draw(st.sampled_from([0.1, 0.5])),
            "instructions": draw(st.sampled_from(["Help.", "Be brief."])),
        },
        "customAttributes": [
            {"name": n, "type": ATTRIBUTE_TYPES[n], "label": draw(st.sampled_from(["A", "B"]))}
            for n in own
        ],
    }
    if draw(st.booleans()):
        spec["attributeSets"] = ["crm"]
    return {
        "apiVersion": "botctl/v1",
        "kind": "Chatbot",
        "metadata": {"name": f"bot-{i}", "labels": {"tier": draw(st.sampled_from(TIERS))}},
        "spec": spec,
    }


def shared(draw: Any) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "botctl/v1",
            "kind": "AttributeSet",
            "metadata": {"name": "crm"},
            "spec": {
                "customAttributes": [
                    {"name": n, "type": "text", "label": draw(st.sampled_from(["X", "Y"]))}
                    for n in SET_ATTRIBUTES
                ]
            },
        },
        {
            "apiVersion": "botctl/v1",
            "kind": "Defaults",
            "metadata": {"name": "by-tier"},
            "spec": {
                "selector": {"matchLabels": {"tier": draw(st.sampled_from(TIERS))}},
                "settings": {"visibility": draw(st.sampled_from(["public", "private"]))},
            },
        },
    ]


EDITS = (
    "temp",
    "attribute",
    "set-label",
    "selector",
    "defaults-settings",
    "label",
    "delete",
    "chatbot-id",
    "add",
    "prune",
    "nothing",
)


def edit(docs: list[dict[str, Any]], what: str, draw: Any, fresh: int) -> None:
    bots = [d for d in docs if d["kind"] == "Chatbot"]
    by_kind = {d["kind"]: d for d in docs if d["kind"] != "Chatbot"}
    bot = draw(st.sampled_from(bots)) if bots else None
    if what == "temp" and bot is not None:
        bot["spec"]["settings"]["temp"] = draw(st.sampled_from([0.1, 0.5, 0.9]))
    elif what == "attribute" and bot is not None:
        own = bot["spec"]["customAttributes"]
        if own and draw(st.booleans()):
            own.pop(draw(st.integers(0, len(own) - 1)))
        else:
            free = [n for n in ATTRIBUTE_TYPES if n not in {a["name"] for a in own}]
            if free:
                name = draw(st.sampled_from(free))
                own.append({"name": name, "type": ATTRIBUTE_TYPES[name], "label": "C"})
    elif what == "set-label":
        attribute = draw(st.sampled_from(by_kind["AttributeSet"]["spec"]["customAttributes"]))
        attribute["label"] = draw(st.sampled_from(["X", "Y", "Z"]))
    elif what == "selector":
        selector = by_kind["Defaults"]["spec"]["selector"]["matchLabels"]
        selector["tier"] = draw(st.sampled_from(TIERS))
    elif what == "defaults-settings":
        by_kind["Defaults"]["spec"]["settings"]["visibility"] = draw(
            st.sampled_from(["public", "private"])
        )
    elif what == "label" and bot is not None:
        bot["metadata"]["labels"]["tier"] = draw(st.sampled_from(TIERS))
    elif what == "delete" and bot is not None and len(bots) > 1:
        docs.remove(bot)
    elif what == "chatbot-id" and bot is not None:
        bot["spec"]["chatbotId"] = f"id-{fresh}"
    elif what == "add":
        docs.append(chatbot(fresh, draw))
    elif what == "prune" and bot is not None:  # the state knows nothing of it
        bot["spec"]["prune"] = not bot["spec"].get("prune", False)


def files(docs: list[dict[str, Any]], draw: Any) -> list[tuple[str, bytes]]:
    """The documents spread over files: one per document, or some together, in any order
    (renaming or merging files changes nothing of the configuration)."""
    count = draw(st.integers(1, len(docs)))
    groups: dict[int, list[dict[str, Any]]] = {}
    for doc in draw(st.permutations(docs)):
        groups.setdefault(draw(st.integers(0, count - 1)), []).append(doc)
    return [
        (f"f{n}.yaml", yaml.safe_dump_all(group, sort_keys=False).encode())
        for n, group in sorted(groups.items())
    ]


def applied(base: tuple[BotSpec, ...], draw: Any) -> tuple[State, Live]:
    """The base applied to a service whose chatbots held nothing, except chatbots whose apply
    was cut short (nothing, or only its first operation, recorded and sent)."""
    empty = Live(bots={b.chatbot_id: nothing_held(b.chatbot_id) for b in base})
    plan = compute_plan_of(base, empty, State())
    state = State()
    for bot in base:
        ops = [op for op in plan.operations if op.bot.chatbot_id == bot.chatbot_id]
        cut = draw(st.sampled_from(["all", "all", "all", "none", "first"]))
        for op in ops if cut == "all" else ops[:1] if cut == "first" else []:
            state.apply_operation(op)
    return state, served(state, base)


def nothing_held(chatbot_id: str) -> LiveBot:
    return LiveBot(chatbot_id=chatbot_id, settings=ChatbotSettings(), attributes={})


def served(state: State, bots: tuple[BotSpec, ...]) -> Live:
    """What the service holds: what the state records as sent (all of it readable here)."""
    out = {}
    for bot in bots:
        record = state.record_for(bot.chatbot_id)
        out[bot.chatbot_id] = LiveBot(
            chatbot_id=bot.chatbot_id,
            settings=record.settings if record else ChatbotSettings(),
            attributes=dict(record.attributes) if record else {},
        )
    return Live(bots=out)


def compute_plan_of(bots: tuple[BotSpec, ...], live: Live, state: State) -> Plan:
    from botctl.models import Desired

    return compute_plan(Desired(bots=bots), live, state)


def of_bot(plan: Plan, chatbot_id: str) -> tuple[Any, ...]:
    return (
        tuple(op for op in plan.operations if op.bot.chatbot_id == chatbot_id),
        tuple(u for u in plan.unmanaged if u.bot.chatbot_id == chatbot_id),
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_a_scoped_plan_is_honest_about_what_it_leaves_out(data: st.DataObject) -> None:
    draw = data.draw
    count = draw(st.integers(1, 5))
    base_docs = shared(draw) + [chatbot(i, draw) for i in range(count)]
    head_docs = copy.deepcopy(base_docs)
    for n, what in enumerate(draw(st.lists(st.sampled_from(EDITS), min_size=1, max_size=4))):
        edit(head_docs, what, draw, fresh=100 + n)
    environ: dict[str, str] = {}
    base = load_fleet_from(files(base_docs, draw), environ=environ).desired.bots
    head = load_fleet_from(files(head_docs, draw), environ=environ).desired.bots

    state, live = applied(base, draw)
    # Dashboard edits (drift) on some chatbots: the only verified changes allowed outside.
    drifted: set[tuple[str, str]] = set()
    bots = dict(live.bots)
    # An attribute made in the dashboard, that botctl never managed, on some chatbots: left
    # alone, until a configuration says prune: true.
    for bot in draw(st.lists(st.sampled_from(base), unique_by=lambda b: b.chatbot_id)):
        held = bots[bot.chatbot_id]
        made = CustomAttribute(name="legacy", type="text", label="Legacy")
        bots[bot.chatbot_id] = held.model_copy(
            update={"attributes": {**(held.attributes or {}), "legacy": made}}
        )
    for bot in draw(st.lists(st.sampled_from(base), unique_by=lambda b: b.chatbot_id)):
        held = bots[bot.chatbot_id]
        assert held.settings is not None
        moved = held.settings.model_copy(update={"name": "Edited in the dashboard"})
        bots[bot.chatbot_id] = held.model_copy(update={"settings": moved})
        drifted.add((bot.chatbot_id, "name"))
    for bot in head:  # chatbots new in HEAD exist on the service, empty
        bots.setdefault(bot.chatbot_id, nothing_held(bot.chatbot_id))
    live = Live(bots=bots)

    scope = scope_between(base, head, state)
    planned = {b.bot.chatbot_id for b in scope.planned}
    full = compute_plan_of(head, live, state)
    scoped = compute_plan_of(tuple(b for b in head if b.chatbot_id in planned), live, state)

    assert {r.chatbot_id for r in scoped.bots} == planned
    for bot in head:
        if bot.chatbot_id in planned:
            assert of_bot(scoped, bot.chatbot_id) == of_bot(full, bot.chatbot_id), bot.name
        else:
            caused = [
                (ref.chatbot_id, change.path)
                for ref, change in full.changes()
                if ref.chatbot_id == bot.chatbot_id
                and change.confidence in ("verified", "assumed")
                and (ref.chatbot_id, change.path) not in drifted
            ]
            assert caused == [], (bot.name, caused)
    # Every chatbot of the base gone from HEAD is named as removed.
    gone = {(b.api_key_env, b.chatbot_id) for b in base} - {
        (b.api_key_env, b.chatbot_id) for b in head
    }
    assert {(b.bot.api_key_env, b.bot.chatbot_id) for b in scope.removed} == gone
