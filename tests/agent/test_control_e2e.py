"""Seeing and steering a running agent, end to end: the agent as a process of its own, the
sandbox over loopback HTTP, ``botctl agent sync|suspend|resume|status`` through the real CLI.

- what each chatbot would be sent or what drifted, value by value, in plan-only mode;
- the control token: without it (or a wrong one) 401 and nothing done; /healthz, /readyz and
  /metrics open; the token never shown;
- sync runs a cycle (its number said and waited for);
- suspend holds applying (a dashboard edit is not healed), across a restart (the state keeps
  it), until resume;
- a deny window holds applying, an --override-window applies once.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

from botctl.cli import cli
from tests.agent.support import AgentProcess, by_id, idle, newest
from tests.e2e_support import Bench, bot_yaml

KEY = "sk-control-KEY-5b1e-distinctive"
SECRET = "PROMPT-secret-ocelot-7731"  # a ${secret:} value
TOKEN = "control-token-narwhal-0123456789"  # BOTCTL_CONTROL_TOKEN
NEVER_SHOWN = (KEY, SECRET, TOKEN)


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={KEY: "standard"})
    return Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)


def environment(bench: Bench, token: bool = True) -> dict[str, str]:
    found = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url, "PROMPT_TOKEN": SECRET}
    if token:
        found["BOTCTL_CONTROL_TOKEN"] = TOKEN
    return found


def start(bench: Bench, *argv: str, token: bool = True) -> AgentProcess:
    args = [
        str(bench.config_dir),
        "--state",
        str(bench.state_path),
        "--cache-dir",
        str(bench.workdir / "cache"),
        *argv,
    ]
    return AgentProcess(
        args, environment(bench, token), bench.workdir, token=TOKEN if token else None
    )


@pytest.fixture
def agents() -> Iterator[list[AgentProcess]]:
    """Every agent a test starts, killed at its end whatever happened."""
    started: list[AgentProcess] = []
    yield started
    for agent in started:
        agent.kill()


def steer(agent: AgentProcess, *args: str, token: str | None = TOKEN) -> Result:
    """``botctl agent VERB ARGS --url`` the agent, with ``token`` in BOTCTL_CONTROL_TOKEN."""
    env = {"BOTCTL_CONTROL_TOKEN": token} if token is not None else {}
    result = CliRunner().invoke(cli, ["agent", *args, "--url", agent.url], env=env)
    assert "Traceback" not in result.output, result.output
    for secret in NEVER_SHOWN:
        assert secret not in result.output
    return result


def assert_never_shown(agent: AgentProcess, *texts: str) -> None:
    for text in (agent.log_text(), *texts):
        for secret in NEVER_SHOWN:
            assert secret not in text


def metric(agent: AgentProcess, name: str, **labels: str) -> float:
    text = agent.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no {name}{labels} in:\n{text}")


SETTINGS = (
    "name: Support Bot\nmodel: gpt-4o-mini\ntemp: 0.2\n"
    "instructions: 'Answer with ${secret:PROMPT_TOKEN} in mind'"
)


def test_plan_only_status_names_each_value_out_of_sync(bench: Bench, agents: list[Any]) -> None:
    """Without --auto-apply, /status says per chatbot what an apply would send and what
    drifted: path, live, desired, class; an unmanaged attribute by its name. Secrets show as
    (secret); `botctl agent status` prints the same."""
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings=SETTINGS))
    env = environment(bench)
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir), env=env)
    assert applied.exit_code == 0, applied.output
    # The configuration moves (pending), the dashboard too (changed outside, an attribute
    # of its own, the secret-bearing instructions).
    bench.write(
        "support.yaml", bot_yaml("support", "bot-1", settings=SETTINGS.replace("0.2", "0.5"))
    )
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {
            "settings": {"model": "gpt-5-mini", "instructions": f"leaked {SECRET} here"},
            "attributes": [{"name": "nickname", "type": "text", "label": "Nick"}],
        },
    )
    agent = start(bench, "--interval", "1h")
    agents.append(agent)
    doc = agent.wait_for(lambda d: newest(d) >= 1 and idle(d), what="the first cycle")
    assert doc["cycles"][0]["result"] == "drifted"
    bot = by_id(doc)["bot-1"]
    assert bot["status"] == "Drifted"
    entries = {(e["class"], e["path"]): e for e in bot["diff"]["items"]}
    assert bot["diff"]["omitted"] == 0
    model = entries["changed_outside", "model"]
    assert (model["resource"], model["live"], model["desired"], model["lastApplied"]) == (
        "settings",
        "gpt-5-mini",
        "gpt-4o-mini",
        "gpt-4o-mini",
    )
    temp = entries["pending", "temp"]
    # temp is not readable: the value last applied is what botctl knows.
    assert (temp["live"], temp["desired"], temp["lastApplied"]) == (None, 0.5, 0.2)
    assert (temp["action"], temp["confidence"]) == ("update", "assumed")
    assert entries["unmanaged", "nickname"]["resource"] == "attribute"
    instructions = entries["changed_outside", "instructions"]
    assert instructions["live"] == "(secret)"
    assert instructions["desired"] == "Answer with (secret) in mind"
    # Nothing was applied: plan only.
    assert bench.bot_state("bot-1")["settings"]["model"] == "gpt-5-mini"
    assert bot["lastAppliedRevision"] is None

    shown = steer(agent, "status")
    assert shown.exit_code == 0, shown.output
    assert "support (bot-1): Drifted" in shown.output
    assert (
        "changed_outside settings model: live gpt-5-mini · desired gpt-4o-mini · last applied "
        "gpt-4o-mini" in shown.output
    )
    assert (
        "pending settings temp: live unknown (not readable) · desired 0.5 · last applied 0.2"
        in shown.output
    )
    assert "unmanaged attribute nickname" in shown.output
    as_json = steer(agent, "status", "--format", "json")
    assert json.loads(as_json.output)["chatbots"][0]["diff"] == bot["diff"]
    page = agent.get("/").text
    assert "nickname" in page
    assert "gpt-5-mini" in page
    assert_never_shown(agent, json.dumps(doc), page)
    assert agent.stop(signal.SIGTERM) == 0
