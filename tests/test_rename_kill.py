"""A rename killed (SIGKILL) at random instants of its migration, each followed by a re-run:
every value moved, none lost or overwritten, the old attribute archived only at the end.

Each instant is chosen in the request log: the sandbox holds one request of the phase drawn
(the new attribute's create, one contact's copy, the old attribute's archive) and the kill
lands while it is in flight, which each instant asserts.

uv run pytest -m slow tests/test_rename_kill.py -s         # the slow suite: 50 instants
BOTCTL_KILL_INSTANTS=200 uv run pytest tests/test_rename_kill.py -s   # any number
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from botctl.store.state import load_state
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.samples import sample_size

SAMPLE, SLOW_SUITE = 2, 50  # instants in the default run, and in the slow suite (-m slow)
CARRIERS, OTHERS, ALREADY = 2400, 150, 50
RENAMED = "- {name: tier, type: text, label: Tier, renamedFrom: plan}"
EDITED = "edited by a person after the kill"


def instants(config: pytest.Config) -> int:
    """BOTCTL_KILL_INSTANTS, else 50 in the long run (or the slow suite alone, ``-m slow``),
    else a sample (``tests/samples.py``)."""
    slow = config.option.markexpr.strip() == "slow"
    return sample_size("BOTCTL_KILL_INSTANTS", SAMPLE, SLOW_SUITE, slow_selected=slow)


def fresh_world(bench: Bench) -> None:
    bench.admin("POST", "/reset")
    generate = [
        {"count": CARRIERS, "prefix": "c", "custom_attributes": {"plan": "pro-{i}", "n": 1}},
        {"count": OTHERS, "prefix": "o", "custom_attributes": {"n": 2}},
    ]
    # Contacts that carry both already (a value set by hand in the new name too): right.
    already = [
        {"external_id": f"a{i}", "custom_attributes": {"plan": f"x{i}", "tier": f"x{i}"}}
        for i in range(ALREADY)
    ]
    attributes = [
        {"name": "plan", "type": "text"},
        {"name": "n", "type": "number"},
        {"name": "tier", "type": "text", "label": "Tier"},
    ]
    bench.create_bot("bot-1", attributes=attributes, contacts=already, generate_contacts=generate)
    # tier is made with the contacts above; the rename would otherwise create it. Half the
    # instants start without it (below), so the create is among what a kill can interrupt.
    bench.clear_log()


def world_without_tier(bench: Bench) -> None:
    bench.admin("POST", "/reset")
    generate = [
        {"count": CARRIERS, "prefix": "c", "custom_attributes": {"plan": "pro-{i}", "n": 1}},
        {"count": OTHERS, "prefix": "o", "custom_attributes": {"n": 2}},
    ]
    attributes = [{"name": "plan", "type": "text"}, {"name": "n", "type": "number"}]
    bench.create_bot("bot-1", attributes=attributes, generate_contacts=generate)
    bench.clear_log()


def contacts(bench: Bench) -> dict[str, dict[str, Any]]:
    world = bench.admin("GET", "/state")["chatbots"][0]
    return {c["external_id"]: c["custom_attributes"] for c in world["contacts"]}


def attribute(bench: Bench, name: str) -> dict[str, Any] | None:
    world = bench.admin("GET", "/state")["chatbots"][0]
    return next((a for a in world["attributes"] if a["name"] == name), None)


def wait_until_answered(bench: Bench) -> None:
    """Until the sandbox answered every request it received (the held one too: it finishes
    what a dead client sent, as a service would)."""
    deadline = time.monotonic() + 60
    while any(r["status"] is None for r in bench.requests()):
        assert time.monotonic() < deadline, "the sandbox never answered"
        time.sleep(0.05)


HOLD_MS = 1500  # the request the kill lands during: in flight this long
Phase = Literal["creating", "copying", "archiving"]


def hold(bench: Bench, phase: Phase, rng: random.Random) -> tuple[str, str]:
    """Have the sandbox hold one request of ``phase``; its method and path."""
    base = "/api/v1/chatbots/bot-1"
    method, path = {
        "creating": ("POST", f"{base}/custom-attributes"),
        # A carrier past the first pages: values have moved, not all (pages go in order).
        "copying": ("PATCH", f"{base}/contacts/c{rng.randrange(300, CARRIERS - 100)}"),
        "archiving": ("PUT", f"{base}/custom-attributes/plan"),
    }[phase]
    bench.admin("POST", "/faults", {"method": method, "path": path, "latency_ms": HOLD_MS})
    return method, path


def held_request(bench: Bench, method: str, path: str) -> dict[str, Any] | None:
    return next(
        (
            r
            for r in bench.requests()
            if (r["method"], r["path"], r["fault"]) == (method, path, "before")
        ),
        None,
    )


def landed(bench: Bench, phase: Phase, at_kill: dict[str, Any]) -> None:
    """The kill landed in ``phase``: its held request unanswered, and what the log says had
    been sent of the rename by then."""
    assert at_kill["status"] is None, at_kill
    log = bench.requests()
    before = [r for r in log if r["seq"] < at_kill["seq"]]
    copies = [r for r in before if r["method"] == "PATCH"]
    if phase == "creating":
        assert copies == []
    elif phase == "copying":
        assert 0 < len(copies) < CARRIERS
    else:
        assert len({r["path"] for r in copies}) >= CARRIERS


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(latency_ms=3)
    b = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    b.write("support.yaml", bot_yaml(attributes=RENAMED + "\n- {name: n, type: number}"))
    return b


def start_apply(bench: Bench) -> subprocess.Popen[bytes]:
    args = ["apply", "--auto-approve", "--state", str(bench.state_path), str(bench.config_dir)]
    return launch.start(
        *args,
        env={"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_rename_killed_at_random_instants(
    bench: Bench, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(20261125)
    count = instants(request.config)
    phases: dict[str, int] = {}
    for instant in range(count):
        with_tier = instant % 2 == 0
        (fresh_world if with_tier else world_without_tier)(bench)
        bench.state_path.unlink(missing_ok=True)
        # Where to kill: a create only where tier is still to be made.
        choices: list[Phase] = ["copying", "archiving"]
        if not with_tier:
            choices.append("creating")
        phase = rng.choice(choices)
        method, path = hold(bench, phase, rng)
        proc = start_apply(bench)
        deadline = time.monotonic() + 120
        while (at_kill := held_request(bench, method, path)) is None:
            assert proc.poll() is None, f"instant {instant}: the apply ended before {phase}"
            assert time.monotonic() < deadline, f"instant {instant}: never reached {phase}"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        landed(bench, phase, at_kill)
        phases[phase] = phases.get(phase, 0) + 1
        bench.admin("DELETE", "/faults")
        wait_until_answered(bench)  # what the dead run sent has landed

        # The old attribute is archived only if every value had moved.
        load_state(bench.state_path)  # valid, or absent: never half-written
        held = contacts(bench)
        plan = attribute(bench, "plan")
        moved = sum(1 for i in range(1, CARRIERS + 1) if held[f"c{i}"].get("tier") == f"pro-{i}")
        assert plan is not None
        if plan["archived"]:
            assert moved == CARRIERS, f"instant {instant}: archived with {moved} moved"

        # A person edits one moved contact meanwhile (new value, old cleared): never undone.
        edited = next(
            (f"c{i}" for i in range(1, CARRIERS + 1, 97) if held[f"c{i}"].get("tier")), None
        )
        if edited is not None and not plan["archived"]:
            httpx.patch(
                f"{bench.api_url}/chatbots/bot-1/contacts/{edited}",
                json={"data": {"custom_attributes": {"tier": EDITED, "plan": None}}},
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=10,
            ).raise_for_status()
        else:
            edited = None

        rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
        assert rerun.exit_code == 0, rerun.output

        held = contacts(bench)
        for i in range(1, CARRIERS + 1):
            want = EDITED if f"c{i}" == edited else f"pro-{i}"
            assert held[f"c{i}"].get("tier") == want, (instant, i, held[f"c{i}"])
            assert held[f"c{i}"]["n"] == 1  # the contact's other values untouched
        if with_tier:
            assert all(held[f"a{i}"]["tier"] == f"x{i}" for i in range(ALREADY))
        assert all("tier" not in held[f"o{i}"] for i in range(1, OTHERS + 1))
        plan = attribute(bench, "plan")
        assert plan is not None
        assert plan["archived"] is True
        state = load_state(bench.state_path)
        assert state.bots["bot-1"].migrations == {}
        assert state.bots["bot-1"].attributes["plan"].archived
        assert bench.plan_json(str(bench.config_dir))["changes"] == []
    with capsys.disabled():
        print(f"\nrename kills: {count} instants: {phases}")
    assert sum(phases.values()) == count
