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


def test_the_control_token_guards_steering_and_the_status(bench: Bench, agents: list[Any]) -> None:
    """Without the token (or with a wrong one): 401 and nothing done, before any body is
    read; with it: a sync runs the cycle it names. The probes and metrics stay open."""
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    agent = start(bench, "--auto-apply", "--interval", "1h")
    agents.append(agent)
    doc = agent.wait_for(lambda d: newest(d) >= 1 and idle(d), what="the first cycle")
    assert doc["cycles"][0]["result"] == "applied", (doc["cycles"], agent.log_text())

    for path in ("/healthz", "/readyz", "/metrics"):
        assert agent.get(path, headers={}).status_code == 200, path
    for path in ("/status", "/"):
        refused = agent.get(path, headers={})
        assert refused.status_code == 401, path
        assert "Basic" in refused.headers["www-authenticate"]
        assert agent.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        # A browser's Basic credentials: the token as the password.
        assert agent.get(path, auth=("anyone", TOKEN)).status_code == 200, path

    without = steer(agent, "sync", token=None)
    assert without.exit_code == 1
    assert "set the control token in BOTCTL_CONTROL_TOKEN" in without.output
    wrong = steer(agent, "suspend", token="not-the-token-at-all")
    assert wrong.exit_code == 1
    assert "refused the token in BOTCTL_CONTROL_TOKEN (401: wrong control token)" in wrong.output
    for action in ("sync", "suspend", "resume"):
        raw = httpx.post(f"{agent.url}/control/{action}", json={}, timeout=10)
        assert raw.status_code == 401
        assert raw.headers["www-authenticate"].startswith("Bearer")
        # Basic credentials do not steer: a browser attaches them to any site's form post.
        basic = httpx.post(f"{agent.url}/control/{action}", auth=("x", TOKEN), timeout=10)
        assert basic.status_code == 401
    doc = agent.status()
    assert (newest(doc), doc["pendingCycle"], doc["suspended"]) == (1, None, None)
    unauthorized = metric(
        agent, "botctl_agent_control_requests_total", action="sync", result="unauthorized"
    )
    assert unauthorized == 3

    synced = steer(agent, "sync")
    assert synced.exit_code == 0, synced.output
    assert "cycle 2 asked for: runs now" in synced.output
    assert "cycle 2: synced" in synced.output
    doc = agent.status()
    assert (newest(doc), doc["cycles"][0]["trigger"]) == (2, "control")
    assert any(e.get("event") == "control" and "sync asked by" in e["message"] for e in agent.log())
    quick = steer(agent, "sync", "--no-wait", "--format", "json")
    assert json.loads(quick.output)["cycle"] == 3
    agent.wait_for(lambda d: newest(d) == 3 and idle(d), what="cycle 3")
    assert_never_shown(agent)
    assert agent.stop(signal.SIGTERM) == 0


def test_a_control_token_too_short_is_refused_at_start(bench: Bench, tmp_path: Path) -> None:
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    result = CliRunner().invoke(
        cli,
        ["agent", str(bench.config_dir), "--state", str(tmp_path / "s.json")],
        env={"BOTCTL_CONTROL_TOKEN": "replace-me"},
    )
    assert result.exit_code == 1
    assert "the control token in BOTCTL_CONTROL_TOKEN is too short: 10 characters" in result.output
    assert "replace-me" not in result.output


def test_off_loopback_without_a_token_the_status_is_closed(bench: Bench, agents: list[Any]) -> None:
    """Listening beyond loopback with no token: /status and the page answer 401 (the
    probes and metrics do not), and the control API is off (403)."""
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    args = [str(bench.config_dir), "--state", str(bench.state_path), "--interval", "1h"]
    agent = AgentProcess(
        [*args, "--listen", "0.0.0.0:0"], environment(bench, token=False), bench.workdir
    )
    agents.append(agent)
    assert agent.get("/readyz").status_code in (200, 503)
    assert agent.get("/metrics").status_code == 200
    closed = agent.get("/status")
    assert closed.status_code == 401
    assert "beyond loopback and has no control token" in closed.json()["error"]
    assert agent.get("/").status_code == 401
    off = steer(agent, "suspend", token=TOKEN)
    assert off.exit_code == 1
    assert "the control API is off" in off.output
    warned = "is beyond loopback and BOTCTL_CONTROL_TOKEN is unset"
    assert any(warned in line for line in agent.lines)
    assert agent.stop(signal.SIGTERM) == 0


def healed(doc: dict[str, Any]) -> bool:
    return bool(by_id(doc)["bot-1"]["status"] == "Synced")


def test_suspend_holds_healing_across_a_restart_until_resumed(
    bench: Bench, agents: list[Any]
) -> None:
    """Suspended, a self-healing agent reads and reports a dashboard edit and leaves it;
    the suspension is in the state, so a restarted agent (or the standby taking over) is
    suspended too; resumed, it heals at once."""
    settings = "name: Support\nmodel: gpt-4o-mini\ntemp: 0.2"
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings=settings))
    common = ("--auto-apply", "--self-heal", "--interval", "0.3s")
    agent = start(bench, *common)
    agents.append(agent)
    doc = agent.wait_for(lambda d: d["appliedRevision"] and healed(d), what="first sync")
    revision = doc["revision"]
    bot = by_id(doc)["bot-1"]
    assert bot["lastAppliedRevision"] == revision
    assert bot["lastApplied"] is not None

    said = steer(agent, "suspend", "--reason", "incident 42", "--by", "alice")
    assert said.exit_code == 0, said.output
    assert "suspended by alice since" in said.output
    assert ": incident 42. Written to the state." in said.output
    assert json.loads(bench.state_path.read_text())["agent"]["suspended"]["by"] == "alice"
    again = steer(agent, "suspend", "--by", "bob")
    assert "already suspended by alice" in again.output
    assert metric(agent, "botctl_agent_suspended") == 1

    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
    doc = agent.wait_for(lambda d: by_id(d)["bot-1"]["status"] == "Drifted", what="drift")
    seen = newest(doc)
    doc = agent.wait_for(lambda d: newest(d) >= seen + 3, what="three more cycles")
    assert settings_of(bench)["model"] == "gpt-5-mini"  # read and reported, not healed
    assert doc["suspended"]["reason"] == "incident 42"
    # A cycle whose watch slice found the edit says what held its heal (a cycle with no slice
    # due had nothing to apply, so nothing held it).
    assert any("suspended by alice" in (c["held"] or "") for c in doc["cycles"]), doc["cycles"]
    assert by_id(doc)["bot-1"]["diff"]["items"][0]["path"] == "model"
    assert "Suspended" in agent.get("/").text
    assert agent.stop(signal.SIGTERM) == 0

    # A new process (a restart, or the standby taking the lease over) reads the suspension.
    agent = start(bench, *common)
    agents.append(agent)
    doc = agent.wait_for(lambda d: newest(d) >= 3, what="three cycles of the new agent")
    assert doc["suspended"]["by"] == "alice"
    assert settings_of(bench)["model"] == "gpt-5-mini"
    # The last applied revision, per chatbot, comes from the state too.
    assert by_id(doc)["bot-1"]["lastAppliedRevision"] == revision

    resumed = steer(agent, "resume", "--by", "alice")
    assert resumed.exit_code == 0, resumed.output
    assert "resumed; cycle" in resumed.output
    # This process never applied its revision (suspended from its start): it does now.
    doc = agent.wait_for(
        lambda d: any(c["result"] == "applied" for c in d["cycles"]) and healed(d), what="heal"
    )
    assert doc["suspended"] is None
    assert settings_of(bench)["model"] == "gpt-4o-mini"
    assert "suspended" not in json.loads(bench.state_path.read_text()).get("agent", {})
    assert "not suspended" in steer(agent, "resume").output
    messages = [e["message"] for e in agent.log() if e.get("event") == "control"]
    assert any(m.startswith("resumed by alice (from 127.0.0.1)") for m in messages), messages
    assert_never_shown(agent)
    assert agent.stop(signal.SIGTERM) == 0


def settings_of(bench: Bench) -> dict[str, Any]:
    return dict(bench.bot_state("bot-1")["settings"])


def covering_now(zone: str) -> tuple[str, datetime]:
    """A deny window that holds now in ``zone`` (from an hour ago to three hours on, crossing
    midnight when it must), and when it ends."""
    now = datetime.now(ZoneInfo(zone)).replace(second=0, microsecond=0)
    begins, ends = now - timedelta(hours=1), now + timedelta(hours=3)
    day = begins.strftime("%a")
    return f"{day} {begins:%H:%M}-{ends:%H:%M} {zone}", ends.astimezone(UTC)


def test_a_deny_window_holds_applying_and_an_override_applies_once(
    bench: Bench, agents: list[Any]
) -> None:
    bench.create_bot("bot-1", account=KEY, settings={"temp": 0.9})
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    window, ends = covering_now("Pacific/Auckland")
    agent = start(bench, "--auto-apply", "--interval", "1h", "--deny-window", window)
    agents.append(agent)
    doc = agent.wait_for(lambda d: newest(d) >= 1 and idle(d), what="the first cycle")
    assert doc["denyWindow"] == {"window": window, "until": ends.isoformat()}
    assert doc["denyWindows"] == [window]
    assert doc["cycles"][0]["held"] == f"deny window {window!r} until {ends.isoformat()}"
    assert by_id(doc)["bot-1"]["status"] == "OutOfSync"
    assert bench.writes() == []
    assert metric(agent, "botctl_agent_deny_window_active") == 1
    page = agent.get("/").text
    assert "Deny window" in page
    assert window in page

    plain = steer(agent, "sync")
    assert plain.exit_code == 0, plain.output
    assert f"it applies nothing: deny window {window!r}" in plain.output
    assert bench.writes() == []

    missing = steer(agent, "sync", "--override-window")
    assert missing.exit_code == 1
    assert "--override-window needs --reason" in missing.output
    forced = steer(agent, "sync", "--override-window", "--reason", "hotfix INC-7", "--by", "bob")
    assert forced.exit_code == 0, forced.output
    assert "it applies although the deny window holds" in forced.output
    assert "applied at" in forced.output
    assert settings_of(bench)["temp"] == 0.2
    doc = agent.status()
    assert doc["cycles"][0]["windowOverride"]["reason"] == "hotfix INC-7"
    assert by_id(doc)["bot-1"]["lastAppliedRevision"] == doc["revision"]
    logged = [e["message"] for e in agent.log() if e.get("event") == "control"]
    assert "applying inside a deny window: overridden by bob: hotfix INC-7" in logged

    # Once: the next change waits for the window's end again.
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.4"))
    bench.clear_log()
    after = steer(agent, "sync")
    assert "deny window" in after.output
    assert bench.writes() == []
    assert settings_of(bench)["temp"] == 0.2
    assert_never_shown(agent)
    assert agent.stop(signal.SIGTERM) == 0


def test_a_suspension_holds_when_the_standby_takes_over(bench: Bench, agents: list[Any]) -> None:
    """Two replicas on one state: control goes to the lease holder (the standby answers 503
    naming it); suspended there, the standby that takes the lease over when the holder dies
    is suspended too."""
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="model: gpt-4o-mini"))
    flags = ("--auto-apply", "--self-heal", "--interval", "0.3s", "--lease", "3s")
    first = start(bench, *flags)
    agents.append(first)
    first.wait_for(lambda d: d["appliedRevision"] and healed(d), what="first sync")
    second = start(bench, *flags, "--cache-dir", str(bench.workdir / "cache-2"))
    agents.append(second)
    second.wait_for(lambda d: d["role"] == "standby", what="the second standing by")

    refused = steer(second, "suspend", "--reason", "wrong replica")
    assert refused.exit_code == 1
    assert "503: this replica is standby" in refused.output
    assert "control goes to the lease holder (the lease holder: pid" in refused.output
    said = steer(first, "suspend", "--reason", "freeze", "--by", "carol")
    assert "Written to the state." in said.output, said.output

    first.kill()  # SIGKILL: the lease lapses, the standby takes over
    doc = second.wait_for(
        lambda d: d["role"] == "active" and newest(d) >= 1 and idle(d), 60, "the takeover"
    )
    assert doc["suspended"]["by"] == "carol"
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
    doc = second.wait_for(lambda d: by_id(d)["bot-1"]["status"] == "Drifted", what="drift")
    seen = newest(doc)
    second.wait_for(lambda d: newest(d) >= seen + 3, what="three more cycles")
    assert settings_of(bench)["model"] == "gpt-5-mini"  # not healed
    assert second.stop(signal.SIGTERM) == 0


def test_the_page_in_headless_chromium_shows_holds_and_the_diff(
    bench: Bench, agents: list[Any], tmp_path: Path
) -> None:
    """The status page behind the token (Basic authentication, as a browser sends it): the
    suspension and deny window banners, the refused revision's banner with its error, each
    chatbot's values out of sync under its row, the last applied revision."""
    import subprocess

    from tests.tools import need

    browser = need("chromium", "chromium-browser", install="apt-get install -y chromium")
    bench.create_bot("bot-1", account=KEY, settings={"model": "gpt-5-mini"})
    bench.create_bot("bot-2", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="model: gpt-4o-mini"))
    bench.write("sales.yaml", bot_yaml("sales", "bot-2", settings="temp: 0.3"))
    window, _ = covering_now("America/New_York")
    agent = start(bench, "--auto-apply", "--interval", "0.3s", "--deny-window", window)
    agents.append(agent)
    agent.wait_for(lambda d: newest(d) >= 1, what="the first cycle")
    suspended = steer(agent, "suspend", "--reason", "<b>quiet</b> please", "--by", "dave")
    assert suspended.exit_code == 0, suspended.output
    bench.write("sales.yaml", "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: sales}\n")
    agent.wait_for(lambda d: d["invalidRevision"] is not None, what="the invalid revision")
    assert (
        metric(
            agent,
            "botctl_agent_invalid_revision",
            revision=agent.status()["invalidRevision"]["revision"],
        )
        == 1
    )
    flags = ["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run"]
    profile = f"--user-data-dir={tmp_path / 'chromium'}"
    url = f"http://viewer:{TOKEN}@127.0.0.1:{agent.port}/"
    dom = subprocess.run(
        [browser, *flags, profile, "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    shot = tmp_path / "page.png"
    subprocess.run(
        [browser, *flags, profile, f"--screenshot={shot}", "--window-size=1400,1000", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert '<tr class="chatbot" data-chatbot-id="bot-1">' in dom, dom[:2000]
    assert 'id="suspended"' in dom
    assert "&lt;b&gt;quiet&lt;/b&gt; please" in dom  # escaped, not markup
    assert 'id="window"' in dom
    assert window in dom
    assert 'id="invalid"' in dom
    assert "spec" in dom  # the refused revision's error names what is missing
    assert '<tr class="diff" data-chatbot-id="bot-1">' in dom
    assert "gpt-5-mini" in dom
    assert "gpt-4o-mini" in dom
    assert "<script" not in dom
    assert_never_shown(agent, dom)
    assert agent.stop(signal.SIGTERM) == 0


def test_with_yield_lease_a_suspension_through_one_replica_holds_the_other(
    bench: Bench, agents: list[Any]
) -> None:
    """Two replicas taking turns at the lease (--yield-lease: each holds it only during its
    cycles), neither ever standing by: suspended through the second, the first, whose own
    memory says "not suspended", reads the agent's record again on taking the lease for its
    next cycle, and applies nothing; resumed through the second, it applies."""
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="model: gpt-4o-mini"))
    flags = ("--auto-apply", "--interval", "1h", "--yield-lease")
    first = start(bench, *flags)
    agents.append(first)
    first.wait_for(lambda d: d["appliedRevision"] and idle(d), what="first sync")
    second = start(bench, *flags, "--cache-dir", str(bench.workdir / "cache-2"))
    agents.append(second)
    second.wait_for(lambda d: d["role"] == "active" and newest(d) >= 1 and idle(d), what="second")

    said = steer(second, "suspend", "--reason", "freeze", "--by", "dana")
    assert "Written to the state." in said.output, said.output
    assert json.loads(bench.state_path.read_text())["agent"]["suspended"]["by"] == "dana"
    assert first.status()["suspended"] is None  # as the first last read it
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="model: gpt-5-mini"))
    ran = steer(first, "sync")
    assert ran.exit_code == 0, ran.output
    doc = first.status()
    assert doc["suspended"]["by"] == "dana"
    assert "suspended by dana" in (doc["cycles"][0]["held"] or "")
    assert settings_of(bench)["model"] == "gpt-4o-mini"  # the new revision not applied
    assert "the state says: suspended by dana" in first.log_text()

    before = newest(second.status())
    resumed = steer(second, "resume")
    assert "Written to the state." in resumed.output, resumed.output
    # A resume runs a cycle on its replica: the first's sync comes after it (not standing by).
    second.wait_for(lambda d: newest(d) > before and idle(d), what="the second's cycle")
    ran = steer(first, "sync")
    assert ran.exit_code == 0, ran.output
    assert first.status()["suspended"] is None
    assert settings_of(bench)["model"] == "gpt-5-mini"
    for agent in agents:
        assert agent.stop(signal.SIGTERM) == 0


def test_with_yield_lease_a_suspension_waits_for_ci_and_says_who_held_the_lock(
    bench: Bench, agents: list[Any]
) -> None:
    """Between cycles a --yield-lease agent holds no lease: a suspension's write waits for the
    state's lock another run (CI) holds, the answer says it is not written yet, and an agent
    stopped meanwhile says, naming the holder, that it was never written."""
    from botctl.store.lock import StateLock

    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="model: gpt-4o-mini"))
    agent = start(bench, "--auto-apply", "--interval", "1h", "--yield-lease")
    agents.append(agent)
    agent.wait_for(lambda d: d["appliedRevision"] and idle(d), what="first sync")
    with StateLock(bench.state_path, command="apply in CI"):
        said = steer(agent, "suspend", "--reason", "freeze")
        assert "Not written to the state yet:" in said.output, said.output
        assert "once no other run holds the state's lock" in said.output
        assert agent.stop(signal.SIGTERM) == 0
    log = agent.log_text()
    assert "not written to the state: botctl agent: suspended" in log, log
    assert "LockError: the state's lock is held by pid" in log
    assert "(botctl apply in CI)" in log
    assert "(the agent is stopping): not written" in log
    assert "suspended" not in json.loads(bench.state_path.read_text()).get("agent", {})
