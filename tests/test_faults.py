"""Fault injection: seeded random schedules of 429s (with and without Retry-After), 500s,
latency, and connections dropped before and after the change, over a multi-bot, multi-account
configuration. For every schedule: the run converges or reports exactly what is left, a re-run
converges, no attribute is ever created twice, and the state file agrees with the sandbox.

BOTCTL_FAULT_SCHEDULES=200 uv run pytest tests/test_faults.py -s   # more (tests/samples.py)
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from botctl.errors import ServiceError
from botctl.pipeline.flows import make_plan
from botctl.pipeline.outcome import Outcome
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace
from botctl.service.options import ServiceOptions
from botctl.store.state import load_state
from tests.e2e_support import bot_yaml
from tests.samples import FAULT_SCHEDULES

SCHEDULES = FAULT_SCHEDULES  # tests/samples.py
KEYS = {"key-a": "standard", "key-b": "standard"}
ENVIRON = {"KEY_A": "key-a", "KEY_B": "key-b"}
BOTS = [("alpha", "bot-a", "KEY_A"), ("beta", "bot-b", "KEY_A"), ("gamma", "bot-c", "KEY_B")]
TARGETS = {
    "settings": ("POST", "/api/v1/update-chatbot-settings"),
    "create": ("POST", "/api/v1/chatbots/*/custom-attributes"),
    "update": ("PUT", "/api/v1/chatbots/*/custom-attributes/*"),
    "list_bots": ("GET", "/api/v1/get-chatbots"),
    "list_attrs": ("GET", "/api/v1/chatbots/*/custom-attributes"),
}
ATTRIBUTES = """\
- {name: tier, type: text, label: Tier, description: Plan}
- {name: score, type: number, label: Score}
- {name: vip, type: boolean, label: VIP}
- {name: since, type: date, label: Since, archived: true}"""


def write_config(root: Path) -> None:
    for name, chatbot_id, env in BOTS:
        settings = f"name: {name.title()} Bot\ntemp: 0.4\nstyles: {{theme: dark}}"
        text = bot_yaml(name, chatbot_id, settings, ATTRIBUTES, extra=f"apiKeyEnv: {env}")
        (root / f"{name}.yaml").write_text(text, encoding="utf-8")


def seed_world(url: str, rng: random.Random) -> None:
    """A fresh world whose starting point differs per schedule."""
    admin = httpx.Client(base_url=f"{url}/_sandbox", timeout=10)
    admin.post("/reset").raise_for_status()
    choices = [
        {"name": "tier", "type": "text", "label": "Old tier"},
        {"name": "score", "type": "number", "label": "Score", "archived": True},
        {"name": "stray", "type": "text", "label": "Stray"},
        {"name": "since", "type": "date", "label": "Since"},
    ]
    for _, chatbot_id, env in BOTS:
        attrs = [a for a in choices if rng.random() < 0.5]
        admin.post(
            "/chatbots",
            json={"id": chatbot_id, "account": ENVIRON[env], "settings": {}, "attributes": attrs},
        ).raise_for_status()


def random_fault(rng: random.Random) -> dict[str, Any]:
    target = rng.choice(sorted(TARGETS))
    method, path = TARGETS[target]
    kind = rng.choice(["429", "429-retry-after", "500", "503", "drop", "latency"])
    # Mostly within the retry budget (4 attempts); sometimes beyond it, so failures show.
    count = rng.choice([1, 1, 2, 3, 12])
    fault: dict[str, Any] = {"method": method, "path": path, "count": count}
    fault["when"] = "before" if kind.startswith("429") else rng.choice(["before", "after"])
    if kind == "latency":
        fault["latency_ms"] = rng.randint(5, 40)
    elif kind == "drop":
        fault["drop"] = True
    else:
        fault["status"] = int(kind[:3])
        if kind == "429-retry-after":
            fault["retry_after"] = 0.01
    return fault


def workspace(tmp: Path, api_url: str) -> Workspace:
    return Workspace(
        paths=[tmp / "config"],
        environ=ENVIRON,
        state_path=tmp / "state.json",
        service=ServiceOptions(
            api_url=api_url,
            max_attempts=4,
            retry_base_delay=0.005,
            retry_max_delay=0.02,
            timeout=5,
        ),
        parallelism=3,
    )


def apply_once(ws: Workspace) -> Outcome | ServiceError | None:
    try:
        return asyncio.run(apply_unattended(ws))
    except ServiceError as exc:  # e.g. a read that kept failing: nothing was written
        return exc


def left_over(outcome: Outcome) -> set[tuple[str, str]]:
    return {
        (r.operation.bot.chatbot_id, r.operation.subject)
        for r in outcome.report.results
        if r.status != "applied"
    }


def assert_state_agrees(ws: Workspace, world: dict[str, Any]) -> None:
    state = load_state(ws.state_path)
    bots = {b["id"]: b for b in world["chatbots"]}
    for chatbot_id, record in state.bots.items():
        live = bots[chatbot_id]
        for key, value in record.settings.json_fields.items():
            assert live["settings"].get(key) == value, (chatbot_id, key)
        attrs = {a["name"]: a for a in live["attributes"]}
        for name, recorded in record.attributes.items():
            assert name in attrs, (chatbot_id, name)
            for field, value in recorded.to_json().items():
                assert attrs[name].get(field) == value, (chatbot_id, name, field)


def duplicate_creates(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in log
        if r["method"] == "POST" and r["path"].endswith("/custom-attributes") and r["status"] == 400
    ]


def test_random_fault_schedules(
    sandbox_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = sandbox_factory(api_keys=KEYS)
    admin = httpx.Client(base_url=f"{server.url}/_sandbox", timeout=10)
    outcomes = {"converged": 0, "reported left-over": 0, "failed before writing": 0}
    for seed in range(SCHEDULES):
        rng = random.Random(seed)
        work = tmp_path / f"s{seed}"
        (work / "config").mkdir(parents=True)
        write_config(work / "config")
        ws = workspace(work, server.api_url)
        seed_world(server.url, rng)
        for _ in range(rng.randint(1, 4)):
            admin.post("/faults", json=random_fault(rng)).raise_for_status()

        outcome = apply_once(ws)
        admin.delete("/faults").raise_for_status()
        log = admin.get("/requests").json()["requests"]
        world = admin.get("/state").json()
        assert not duplicate_creates(log), f"seed {seed}: an attribute create was repeated"
        assert_state_agrees(ws, world)

        remaining = asyncio.run(make_plan(ws))
        if isinstance(outcome, ServiceError):
            outcomes["failed before writing"] += 1
            assert not [r for r in log if r["method"] != "GET"], f"seed {seed}"
        elif outcome is not None and not outcome.report.ok:
            outcomes["reported left-over"] += 1
            # Exactly what is left: everything still to do was reported as not applied
            # (a failed write may have landed anyway, so the rest may be smaller).
            planned = {(op.bot.chatbot_id, op.subject) for op in remaining.operations}
            assert planned <= left_over(outcome), f"seed {seed}: {planned - left_over(outcome)}"
        else:
            outcomes["converged"] += 1
            assert remaining.empty, f"seed {seed}: reported success but {remaining.operations}"

        admin.delete("/requests")
        rerun = apply_once(ws)
        assert not isinstance(rerun, ServiceError), f"seed {seed}: {rerun}"
        assert rerun is None or rerun.report.ok, f"seed {seed}"
        assert asyncio.run(make_plan(ws)).empty, f"seed {seed}: re-run did not converge"
        assert not duplicate_creates(admin.get("/requests").json()["requests"])
        assert_state_agrees(ws, admin.get("/state").json())
    with capsys.disabled():
        print(f"\nfault injection: {SCHEDULES} schedules ran: {outcomes}")
    assert sum(outcomes.values()) == SCHEDULES
