"""``botctl agent`` end to end, with real processes: the sandbox over loopback HTTP, a bare git
repository the test pushes to, the agent, a webhook receiver."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agent.support import (
    AgentProcess,
    GitRemote,
    Receiver,
    by_id,
    github_headers,
    gitlab_headers,
    idle,
    last_cycle,
    newest,
    push_body,
)
from tests.e2e_support import Bench, bot_yaml
from tests.tools import need

KEY = "sk-agent-KEY-b71f0c-distinctive"  # found in no response, notification or log line
SECRET = "TOKEN-zebra-91827-secret"  # a ${secret:} value: likewise
HOOK = "hook-secret-4411"
STATE_KEY = "state-key-quokka-6620"  # BOTCTL_STATE_KEY: likewise
GIT_TOKEN = "ghp-gittoken-wombat-3141"  # BOTCTL_GIT_TOKEN: likewise


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={KEY: "standard"})
    return Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)


@pytest.fixture
def receiver() -> Any:
    found = Receiver()
    yield found
    found.close()


def env(bench: Bench, **extra: str) -> dict[str, str]:
    return {
        "BOTCTL_API_KEY": KEY,
        "BOTCTL_API_URL": bench.api_url,
        "PROMPT_TOKEN": SECRET,
        "HOOK_SECRET": HOOK,
        "BOTCTL_STATE_KEY": STATE_KEY,
        "BOTCTL_GIT_TOKEN": GIT_TOKEN,
        **extra,
    }


def start(bench: Bench, *argv: str, **extra: str) -> AgentProcess:
    state = ["--state", str(bench.workdir / "state.json")]
    cache = ["--cache-dir", str(bench.workdir / "cache")]
    return AgentProcess([*state, *cache, *argv], env(bench, **extra), bench.workdir)


def settings_of(bench: Bench, chatbot_id: str) -> dict[str, Any]:
    return dict(bench.bot_state(chatbot_id)["settings"])


SUPPORT = bot_yaml(
    "support",
    "bot-1",
    settings="name: Support Bot\ntemp: 0.2\ninstructions: 'Use ${secret:PROMPT_TOKEN} carefully'",
    attributes="- {name: tier, type: text, label: Tier}",
)
SALES = bot_yaml("sales", "bot-2", settings="name: Sales Bot\ntemp: 0.5")


def all_synced(doc: dict[str, Any]) -> bool:
    return bool(doc["chatbots"]) and all(b["status"] == "Synced" for b in doc["chatbots"])


def test_git_source_webhook_invalid_commit_metrics_and_no_secret_anywhere(
    bench: Bench, receiver: Receiver, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    first = remote.push({"bots/support.yaml": SUPPORT, "bots/sales.yaml": SALES}, "first")
    bench.create_bot("bot-1", account=KEY)
    bench.create_bot("bot-2", account=KEY)
    agent = start(
        bench,
        remote.source("bots"),
        "--auto-apply",
        "--interval",
        "1h",  # only the webhook triggers a cycle after the first
        "--webhook-secret-env",
        "HOOK_SECRET",
        "--notify",
        receiver.url,
        "--notify-on",
        "failed,drift,healed,recovered,synced",
    )
    try:
        # First sync applies the configuration.
        doc = agent.wait_for(lambda d: d["appliedRevision"] == first and all_synced(d))
        assert {b["revision"] for b in doc["chatbots"]} == {first}
        assert settings_of(bench, "bot-1")["temp"] == 0.2
        assert settings_of(bench, "bot-2")["name"] == "Sales Bot"
        assert agent.get("/healthz").status_code == 200
        assert agent.get("/readyz").status_code == 200

        # Unsigned, wrongly signed, wrong token: 401, and no cycle is asked for (a trigger
        # is pending from the moment it is made: none is, and none runs).
        doc = agent.wait_for(idle, what="idle")
        cycles = newest(doc)
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        assert agent.hook(body, {}).status_code == 401
        assert agent.hook(body, github_headers(body, "not-the-secret")).status_code == 401
        assert agent.hook(body, gitlab_headers("not-the-secret")).status_code == 401
        tampered = github_headers(body, HOOK)
        assert agent.hook(body + b" ", tampered).status_code == 401
        doc = agent.status()
        assert idle(doc), doc
        assert newest(doc) == cycles

        # A pushed commit is applied after its signed webhook (the interval is an hour).
        second = remote.push(
            {"bots/sales.yaml": SALES.replace("temp: 0.5", "temp: 0.7")}, "sales warmer"
        )
        bench.clear_log()
        pushed = push_body(second)
        answer = agent.hook(pushed, github_headers(pushed, HOOK))
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"status": "triggered", "cycle": "now"}
        doc = agent.wait_for(lambda d: newest(d) == cycles + 1 and idle(d), 20, "the cycle")
        assert (doc["appliedRevision"], all_synced(doc)) == (second, True)
        assert doc["cycles"][0]["trigger"] == "webhook"
        assert settings_of(bench, "bot-2")["temp"] == 0.7
        assert [w["path"] for w in bench.writes()] == ["/api/v1/update-chatbot-settings"]

        # GitHub's ping answers, a body over 1 MiB is refused: neither triggers a cycle.
        cycles = newest(agent.wait_for(idle, what="idle"))
        ping = github_headers(body, HOOK, event="ping")
        assert agent.hook(body, ping).json() == {"status": "pong"}
        huge = b" " * (2 << 20)
        assert agent.hook(huge, github_headers(huge, HOOK)).status_code == 413

        # A push to another branch, a tag, an event that is not a push: acknowledged, ignored.
        other = json.dumps({"ref": "refs/heads/feature"}).encode()
        answer = agent.hook(other, github_headers(other, HOOK))
        assert answer.json() == {"status": "ignored", "reason": "a push to refs/heads/feature"}
        tag = json.dumps({"ref": "refs/tags/v1"}).encode()
        assert agent.hook(tag, gitlab_headers(HOOK, "Tag Push Hook")).json()["status"] == "ignored"
        issue = json.dumps({"action": "opened"}).encode()
        answer = agent.hook(issue, github_headers(issue, HOOK, event="issues"))
        assert answer.json()["reason"] == "a 'issues' event: only a push triggers a cycle"
        doc = agent.status()
        assert idle(doc), doc
        assert newest(doc) == cycles

        # An invalid commit: reported located (status, log, notification), nothing sent.
        # The error quotes the value: BOTCTL_GIT_TOKEN's (masked everywhere, checked below).
        broken = SALES.replace("temp: 0.5", f"temp: {GIT_TOKEN}")
        third = remote.push({"bots/sales.yaml": broken}, "broken")
        bench.clear_log()
        assert agent.hook(push_body(third), gitlab_headers(HOOK)).status_code == 202
        doc = agent.wait_for(
            lambda d: (d["invalidRevision"] or {}).get("revision") == third, 20, "invalid"
        )
        error = doc["invalidRevision"]["error"]
        assert "bots/sales.yaml:" in error, error
        assert "temp: must be a number" in error, error
        assert str(bench.workdir / "cache") not in error  # the source's paths, not the cache's
        assert doc["appliedRevision"] == second
        assert doc["revision"] == second  # the last good revision is kept
        assert bench.writes() == []
        failed = receiver.wait_for("failed", lambda e: e["event"]["revision"] == third)
        assert "bots/sales.yaml:" in failed[-1]["text"]

        # The next good commit syncs.
        fourth = remote.push({"bots/sales.yaml": SALES.replace("temp: 0.5", "temp: 0.9")})
        pushed = push_body(fourth)
        assert agent.hook(pushed, github_headers(pushed, HOOK)).status_code == 202
        doc = agent.wait_for(lambda d: d["appliedRevision"] == fourth and all_synced(d), 20)
        assert doc["invalidRevision"] is None
        assert settings_of(bench, "bot-2")["temp"] == 0.9
        synced = receiver.wait_for("synced", lambda e: e["event"]["revision"] == fourth)
        assert {e["event"]["revision"] for e in synced} >= {first, second, fourth}
        assert all("text" in b for b in receiver.bodies)

        # /metrics, parsed by the Prometheus client's own parser.
        metrics = agent.get("/metrics")
        families = {f.name: f for f in text_string_to_metric_families(metrics.text)}
        chatbots = {s.labels["status"]: s.value for s in families["botctl_agent_chatbots"].samples}
        assert chatbots["Synced"] == 2
        cycles_by = {
            s.labels["result"]: s.value
            for s in families["botctl_agent_cycles"].samples
            if s.name == "botctl_agent_cycles_total"
        }
        assert cycles_by["applied"] >= 3
        assert cycles_by["invalid"] >= 1
        requests = [
            s for s in families["botctl_agent_requests"].samples if s.name.endswith("_total")
        ]
        assert any(s.labels["operation"] == "update settings" for s in requests)
        assert all(int(s.labels["status"]) < 300 for s in requests), requests
        info = families["botctl_agent_revision_info"].samples[0]
        assert info.labels["revision"] == fourth
        assert families["botctl_agent_last_sync_timestamp_seconds"].samples[0].value > 0
        assert families["botctl_agent_apply_duration_seconds"].samples

        served = [agent.get(p).text for p in ("/status", "/", "/metrics", "/readyz", "/healthz")]
        # The plan of an apply is in /status, secrets masked.
        plans = [c["plan"] for c in agent.status()["cycles"] if c["plan"]]
        assert plans
    finally:
        code = agent.stop(signal.SIGTERM)
    assert code == 0, agent.log_text()
    assert bench.bot_state("bot-1")["settings"]["instructions"] == f"Use {SECRET} carefully"
    everything = "\n".join([*served, *(r.decode() for r in receiver.raw), agent.log_text()])
    assert KEY not in everything
    assert SECRET not in everything
    assert HOOK not in everything
    assert STATE_KEY not in everything
    assert GIT_TOKEN not in everything
    assert "(secret)" in failed[-1]["text"]  # where the token was: masked, not left out
    assert all(line.startswith("{") for line in agent.lines), agent.log_text()


def test_dashboard_edit_reported_without_self_heal_and_healed_with_it(
    bench: Bench, receiver: Receiver
) -> None:
    bench.create_bot("bot-1", account=KEY)
    settings = "name: Support\nmodel: gpt-4o-mini\ntemp: 0.2"
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings=settings))
    common = [str(bench.config_dir), "--auto-apply", "--interval", "0.3s", "--notify"]
    agent = start(bench, *common, receiver.url)
    try:
        agent.wait_for(all_synced, what="first sync")
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
        doc = agent.wait_for(lambda d: by_id(d)["bot-1"]["status"] == "Drifted", what="drift")
        assert by_id(doc)["bot-1"]["drift"] == {"changed_outside": 1}
        drift = receiver.wait_for("drift")
        seen = newest(doc)
        agent.wait_for(lambda d: newest(d) >= seen + 3, what="three more cycles")
        assert settings_of(bench, "bot-1")["model"] == "gpt-5-mini"  # reported, not re-applied
        drift = receiver.events("drift")
        assert len(drift) == 1, receiver.bodies  # once, not every cycle
        assert drift[0]["event"]["items"][0]["key"] == "model"
        assert "support" in drift[0]["text"]

        # The set of drifted values changes (one more; then one put back): each change is
        # news, while the drift itself never ends.
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"name": "Renamed"}})
        drift = receiver.wait_for("drift", lambda e: len(e["event"]["items"]) == 2)
        assert {i["key"] for i in drift[-1]["event"]["items"]} == {"model", "name"}
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-4o-mini"}})
        drift = receiver.wait_for(
            "drift", lambda e: len(e["event"]["items"]) == 1 and e != drift[0]
        )
        assert [i["key"] for i in drift[-1]["event"]["items"]] == ["name"]
        seen = newest(agent.status())
        agent.wait_for(lambda d: newest(d) >= seen + 3, what="three more cycles")
        assert len(receiver.events("drift")) == 3, receiver.bodies
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"name": "Support"}})
        agent.wait_for(all_synced, what="the drift gone")
    finally:
        assert agent.stop(signal.SIGINT) == 0
    healer = start(bench, *common, receiver.url, "--self-heal")
    try:
        # A new agent applies its revision once at start: that alone restores the value.
        healer.wait_for(lambda d: d["appliedRevision"] and all_synced(d), what="first sync")
        assert settings_of(bench, "bot-1")["model"] == "gpt-4o-mini"
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-nano"}})
        doc = healer.wait_for(
            lambda d: any(c["result"] == "healed" for c in d["cycles"]) and all_synced(d),
            what="healed",
        )
        assert settings_of(bench, "bot-1")["model"] == "gpt-4o-mini"
        healed = receiver.wait_for("healed")
        assert len(healed) == 1
        assert healed[0]["event"]["items"][0]["key"] == "model"
        cycle = next(c for c in doc["cycles"] if c["result"] == "healed")
        assert cycle["plan"]["summary"]["update"] == 1
    finally:
        assert healer.stop(signal.SIGTERM) == 0


def test_a_directory_source_keeps_its_last_good_revision_after_an_invalid_edit(
    bench: Bench, receiver: Receiver
) -> None:
    """The last good revision is a copy of the files as they were: the invalid edit of the
    directory is reported once, located in the user's own file, and the cycles go on
    reconciling the good revision (no failure, no backoff) until the file is mended."""
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    agent = start(
        bench, str(bench.config_dir), "--auto-apply", "--interval", "0.2s", "--notify", receiver.url
    )
    try:
        good = agent.wait_for(all_synced, what="first sync")["appliedRevision"]
        bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: hot"))
        doc = agent.wait_for(lambda d: d["invalidRevision"] is not None, what="invalid")
        assert "support.yaml:" in doc["invalidRevision"]["error"]
        assert str(bench.workdir / "cache") not in doc["invalidRevision"]["error"]
        cycles = len(doc["cycles"])
        doc = agent.wait_for(lambda d: len(d["cycles"]) >= min(cycles + 3, 20), what="cycles")
        assert {c["result"] for c in doc["cycles"][:3]} == {"invalid"}  # not failed
        assert (doc["appliedRevision"], doc["revision"], doc["backoffSeconds"]) == (good, good, 0)
        assert len(receiver.wait_for("failed")) == 1  # the invalid revision, once
        bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.4"))
        agent.wait_for(lambda d: d["appliedRevision"] not in (good, None), what="mended")
        assert settings_of(bench, "bot-1")["temp"] == 0.4
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_reassert_every_undoes_an_edit_no_read_can_see(bench: Bench, receiver: Receiver) -> None:
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    agent = start(
        bench,
        str(bench.config_dir),
        "--auto-apply",
        "--self-heal",
        "--reassert-every",
        "1s",
        "--interval",
        "0.3s",
        "--notify",
        receiver.url,
    )
    try:
        agent.wait_for(all_synced, what="first sync")
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"temp": 0.9}})
        deadline = time.monotonic() + 30
        while settings_of(bench, "bot-1")["temp"] != 0.2:
            assert time.monotonic() < deadline, agent.log_text()
            time.sleep(0.1)
        # A scheduled re-send is routine: recorded as the cycle's result, never a "healed"
        # notification (nothing was seen changed outside).
        agent.wait_for(lambda d: any(c["result"] == "healed" for c in d["cycles"]), what="re-sent")
        assert receiver.events("healed") == []
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_a_failing_service_backs_off_to_the_ceiling_and_recovers(
    bench: Bench, receiver: Receiver
) -> None:
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="name: Support\ntemp: 0.2"))
    agent = start(
        bench,
        str(bench.config_dir),
        "--auto-apply",
        "--interval",
        "0.2s",
        "--backoff-max",
        "3s",
        "--notify",
        receiver.url,
    )
    try:
        agent.wait_for(all_synced, what="first sync")
        bench.admin(
            "POST", "/faults", {"method": "GET", "path": "*", "status": 403, "count": 10**6}
        )
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] >= 2, 60, "failures")
        assert doc["backoffSeconds"] >= 2  # 2 s doubling, not the 0.2 s interval
        assert "403" in doc["lastError"]
        # The service's health is not readiness: the pod stays in its Service (webhooks
        # reach it), the failure is in /status and the metrics.
        ready = agent.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "role": "active", "serviceAnswering": False}
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] >= 3, 60, "more failures")
        assert doc["backoffSeconds"] == 3  # the ceiling
        families = text_string_to_metric_families(agent.get("/metrics").text)
        backoff = next(f for f in families if f.name == "botctl_agent_backoff_seconds")
        assert backoff.samples[0].value == 3
        assert len(receiver.wait_for("failed")) == 1  # the first failure of a run only
        bench.admin("DELETE", "/faults")
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] == 0, 60, "recovery")
        assert doc["backoffSeconds"] == 0
        assert agent.get("/readyz").json()["serviceAnswering"] is True
        (recovered,) = receiver.wait_for("recovered")
        assert recovered["event"]["failedCycles"] >= 3
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_status_page_in_headless_chromium_shows_every_chatbot(bench: Bench, tmp_path: Path) -> None:
    import subprocess

    browser = need("chromium", "chromium-browser", install="apt-get install -y chromium")
    names = [f"bot-{i}" for i in range(5)]
    for i, chatbot_id in enumerate(names):
        bench.create_bot(chatbot_id, account=KEY)
        bench.write(f"b{i}.yaml", bot_yaml(f"chatbot-{i}", chatbot_id, settings="temp: 0.3"))
    bench.create_bot("bot-missing-too", account=KEY)
    bench.write("gone.yaml", bot_yaml("ghost", "bot-nowhere", settings="temp: 0.3"))
    agent = start(bench, str(bench.config_dir), "--auto-apply", "--interval", "0.5s")
    try:
        agent.wait_for(lambda d: len(d["cycles"]) >= 2 and d["ready"], what="two cycles")
        flags = ["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run"]
        profile = f"--user-data-dir={tmp_path / 'chromium'}"
        shot = tmp_path / "page.png"
        dom = subprocess.run(
            [browser, *flags, profile, "--dump-dom", agent.url + "/"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        subprocess.run(
            [
                browser,
                *flags,
                profile,
                f"--screenshot={shot}",
                "--window-size=1400,900",
                agent.url + "/",
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    finally:
        agent.stop(signal.SIGTERM)
    from html.parser import HTMLParser

    rows: list[dict[str, str]] = []

    class Rows(HTMLParser):
        current: dict[str, str] | None = None
        cell = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found = dict(attrs)
            if tag == "tr" and found.get("class") == "chatbot":
                self.current = {"id": found.get("data-chatbot-id") or "", "text": ""}
                rows.append(self.current)

        def handle_endtag(self, tag: str) -> None:
            if tag == "tr":
                self.current = None

        def handle_data(self, data: str) -> None:
            if self.current is not None:
                self.current["text"] += data + " "

    Rows().feed(dom)
    assert sorted(r["id"] for r in rows) == sorted([*names, "bot-nowhere"])
    for i, chatbot_id in enumerate(names):
        row = next(r for r in rows if r["id"] == chatbot_id)
        assert f"chatbot-{i}" in row["text"], row
        assert "Synced" in row["text"], row
    ghost = next(r for r in rows if r["id"] == "bot-nowhere")
    assert "Missing" in ghost["text"]
    assert 'http-equiv="refresh"' in dom
    assert "<script" not in dom
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 5000


def test_listener_refuses_a_webhook_when_no_secret_is_configured(bench: Bench) -> None:
    bench.create_bot("bot-1", account=KEY)
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    agent = start(bench, str(bench.config_dir), "--interval", "1h")
    try:
        doc = agent.wait_for(lambda d: d["ready"], what="ready")
        assert by_id(doc)["bot-1"]["status"] == "OutOfSync"  # plan only by default
        assert bench.writes() == []
        answer = httpx.post(agent.url + "/hooks/git", content=b"{}", timeout=10)
        assert answer.status_code == 401
        assert len(agent.status()["cycles"]) == 1
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_a_failed_operation_marks_its_chatbot_failed_and_is_retried(
    bench: Bench, receiver: Receiver
) -> None:
    bench.create_bot("bot-1", account=KEY)
    bench.create_bot("bot-2", account=KEY)
    attributes = "- {name: tier, type: text, label: Tier}"
    bench.write("a.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2", attributes=attributes))
    bench.write("b.yaml", bot_yaml("sales", "bot-2", settings="temp: 0.2", attributes=attributes))
    refused = {
        "method": "POST",
        "path": "/api/v1/chatbots/bot-1/custom-attributes",
        "status": 400,
        "count": 10**6,
    }
    bench.admin("POST", "/faults", refused)
    agent = start(
        bench, str(bench.config_dir), "--auto-apply", "--interval", "0.2s", "--notify", receiver.url
    )
    try:
        doc = agent.wait_for(lambda d: by_id(d)["bot-1"]["status"] == "Failed", what="failed")
        failed = by_id(doc)["bot-1"]
        assert "tier" in failed["lastError"]
        assert "400" in failed["lastError"]
        assert last_cycle(doc) == "failed"
        assert doc["appliedRevision"] is None  # not applied whole: tried again
        agent.wait_for(lambda d: by_id(d)["bot-2"]["status"] == "Synced", what="the other")
        receiver.wait_for("failed")
        bench.admin("DELETE", "/faults")
        doc = agent.wait_for(all_synced, 60, "retried")
        assert doc["appliedRevision"] is not None
        assert by_id(doc)["bot-1"]["lastError"] is None
        receiver.wait_for("recovered")
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_acknowledged_drift_is_not_healed_and_selectors_narrow_the_fleet(bench: Bench) -> None:
    bench.create_bot("bot-1", account=KEY)
    bench.create_bot("bot-2", account=KEY)
    settings = "name: Support\nmodel: gpt-4o-mini"
    bench.write("a.yaml", bot_yaml("support", "bot-1", settings=settings))
    bench.write("b.yaml", bot_yaml("sales", "bot-2", settings="temp: 0.7"))
    ack = bench.workdir / "ack.json"
    bench.env = {"BOTCTL_API_KEY": KEY}
    accepted = bench.run("drift", "--accept", str(ack), str(bench.config_dir))
    assert accepted.exit_code == 0, accepted.output
    # The drift watch reads the fleet every interval (no rate limit is known).
    agent = start(
        bench,
        str(bench.config_dir),
        "--auto-apply",
        "--self-heal",
        "--target",
        "support",
        "--acknowledged",
        str(ack),
        "--interval",
        "0.3s",
    )
    try:
        doc = agent.wait_for(all_synced, what="first sync")
        assert [b["chatbotId"] for b in doc["chatbots"]] == ["bot-1"]
        assert all(w["body"]["chatbotId"] == "bot-1" for w in bench.writes())
        # Accepted before the dashboard edit it covers (the watch would heal it meanwhile):
        # the entry `drift --accept` writes for it.
        until = "2099-01-01T00:00:00+00:00"
        entry = {"chatbotId": "bot-1", "resource": "settings", "key": "model"}
        ack.write_text(json.dumps({"entries": [{**entry, "live": "gpt-5-mini", "until": until}]}))
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
        edited = newest(agent.status())
        doc = agent.wait_for(
            lambda d: any(c["number"] > edited + 1 and c["read"] for c in d["cycles"]),
            what="a read after the edit",
        )
        assert by_id(doc)["bot-1"]["status"] == "Synced"  # acknowledged: not counted
        assert settings_of(bench, "bot-1")["model"] == "gpt-5-mini"  # nor healed
        # The live value moves on: the acknowledgement no longer covers it.
        bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-nano"}})
        agent.wait_for(lambda d: any(c["result"] == "healed" for c in d["cycles"]), what="healed")
        assert settings_of(bench, "bot-1")["model"] == "gpt-4o-mini"
        assert "temp" not in settings_of(bench, "bot-2")  # never selected, never written
    finally:
        assert agent.stop(signal.SIGTERM) == 0


def test_a_revision_past_a_safety_cap_stalls_until_the_next_one(
    bench: Bench, receiver: Receiver
) -> None:
    """A plan the safety caps refuse cannot pass by being tried again: the revision is
    stalled (reported once, no backoff, never retried); the next revision is applied."""
    bench.create_bot("bot-1", account=KEY)
    two = "- {name: tier, type: text, label: Tier}\n- {name: plan, type: text, label: Plan}"
    one = "- {name: tier, type: text, label: Tier}"
    bench.write("a.yaml", bot_yaml("support", "bot-1", attributes=two, extra="prune: true"))
    agent = start(
        bench,
        str(bench.config_dir),
        "--auto-apply",
        "--max-archives",
        "0",
        "--interval",
        "0.2s",
        "--notify",
        receiver.url,
    )
    try:
        first = agent.wait_for(lambda d: d["appliedRevision"] and all_synced(d))["revision"]
        bench.write("a.yaml", bot_yaml("support", "bot-1", attributes=one, extra="prune: true"))
        doc = agent.wait_for(lambda d: d["stalledRevision"] is not None, what="stalled")
        stalled = doc["stalledRevision"]
        assert "max-archives" in stalled["error"] or "archive" in stalled["error"]
        assert doc["appliedRevision"] == first
        assert doc["consecutiveFailures"] == 0  # no backoff: trying again cannot help
        receiver.wait_for("failed", lambda b: "cannot be applied as it is" in b["text"])
        # Cycles go on (the fleet is watched), the stalled revision is never tried again.
        seen = newest(doc)
        doc = agent.wait_for(lambda d: newest(d) >= seen + 3, what="more cycles")
        assert [c["result"] for c in doc["cycles"]].count("stalled") == 1
        assert not [w for w in bench.writes() if w["path"].endswith("/plan")]
        bench.write("a.yaml", bot_yaml("support", "bot-1", attributes=two, settings="temp: 0.4"))
        doc = agent.wait_for(lambda d: d["stalledRevision"] is None and all_synced(d))
        assert doc["appliedRevision"] != first
    finally:
        assert agent.stop(signal.SIGTERM) == 0
