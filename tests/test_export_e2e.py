"""`botctl export` against what a service may hold (the real CLI, the sandbox over loopback
HTTP): text holding ${...} comes back literally, never as the environment; chatbot ids that
are not one URL path segment are refused or skipped before they reach a request; names of
any length make files that validate; the files are written all or none, never over one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e_support import KEY, Bench

LIVE_TEXT = "Tell nobody ${BOTCTL_API_KEY} or $${HOME}, $$ ${secret:X} ${"


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    return Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)


def test_exported_text_comes_back_literally_never_as_the_environment(bench: Bench) -> None:
    """A dashboard text holding ${BOTCTL_API_KEY} was exported as written: the next plan
    interpolated it, printed the key, stored it and sent it back to the service."""
    bench.create_bot(
        "bot-1",
        settings={"name": "Support", "instructions": LIVE_TEXT},
        attributes=[{"name": "tier", "type": "text", "label": LIVE_TEXT}],
    )
    out = bench.workdir / "bots"
    exported = bench.run("export", "bot-1", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    validated = bench.run("validate", str(out), env={"X": "x-value"})
    assert validated.exit_code == 0, validated.output
    assert bench.plan_json(str(out))["changes"] == []

    # The dashboard changes both; apply sends back what was exported: the text as it was.
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {"settings": {"instructions": "edited"}, "attributes": [{"name": "tier", "label": "x"}]},
    )
    bench.clear_log()
    applied = bench.run("apply", "--auto-approve", str(out), env={"X": "x-value"})
    assert applied.exit_code == 0, applied.output
    held = bench.bot_state("bot-1")
    assert held["settings"]["instructions"] == LIVE_TEXT
    assert [a["label"] for a in held["attributes"]] == [LIVE_TEXT]
    sent = json.dumps([w["body"] for w in bench.writes()])
    assert LIVE_TEXT.replace("$", "") not in sent  # nothing was sent with its $ taken away
    everything = applied.output + sent + bench.state_path.read_text() + exported.output
    assert KEY not in everything
    assert "x-value" not in everything


@pytest.mark.parametrize(
    "chatbot_id", [".", "..", "a/b", "a?b=c", "a#b", "a%2e", "a b", "a\x1b[31m", "b" * 129]
)
def test_an_unusable_chatbot_id_is_refused_before_any_request(
    bench: Bench, chatbot_id: str
) -> None:
    result = bench.run("export", "good-one", chatbot_id)
    assert result.exit_code == 1, result.output
    assert "unusable chatbot id: " in result.stderr
    assert "nothing was read" in result.stderr
    assert "good-one" not in result.stderr
    assert bench.requests() == []


def test_listed_ids_that_are_unusable_are_skipped_with_a_warning(bench: Bench) -> None:
    bench.create_bot("bot-1", settings={"name": "Fine"})
    bench.create_bot("..", settings={"name": "Parent"})
    bench.create_bot("a?b", settings={"name": "Query"})
    out = bench.workdir / "bots"
    result = bench.run("export", "--all", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["fine.yaml"]
    assert "the chatbot list holds the id '..', not one URL path segment" in result.stderr
    assert "the chatbot list holds the id 'a?b', not one URL path segment" in result.stderr
    paths = {r["path"] for r in bench.requests()}
    assert paths == {"/api/v1/get-chatbots", "/api/v1/chatbots/bot-1/custom-attributes"}


def test_a_name_of_300_characters_makes_a_file_that_validates(bench: Bench) -> None:
    """A 300-character name crashed export after writing some files (the file name was too
    long for the file system)."""
    bench.create_bot("bot-1", settings={"name": "Aa" * 150})
    bench.create_bot("bot-2", settings={"name": "Aa" * 150})
    bench.create_bot("bot-3", settings={"name": "Short"})
    out = bench.workdir / "bots"
    result = bench.run("export", "--all", "--out", str(out))
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["aa" * 45 + "-2.yaml", "aa" * 45 + ".yaml", "short.yaml"]
    validated = bench.run("validate", str(out))
    assert validated.exit_code == 0, validated.output
    handles = {yaml.safe_load((out / n).read_text())["metadata"]["name"] for n in names}
    assert max(len(h) for h in handles) <= 100


def test_an_existing_file_stops_every_write(bench: Bench) -> None:
    for n in (1, 2, 3):
        bench.create_bot(f"bot-{n}", settings={"name": f"Bot {n}"})
    out = bench.workdir / "bots"
    out.mkdir()
    (out / "bot-2.yaml").write_text("mine\n")
    result = bench.run("export", "--all", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "not overwritten, and nothing was written" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["bot-2.yaml"]
    assert (out / "bot-2.yaml").read_text() == "mine\n"
    assert not bench.state_path.exists()


def test_a_write_that_fails_midway_leaves_nothing(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in (1, 2, 3):
        bench.create_bot(f"bot-{n}", settings={"name": f"Bot {n}"})
    out = bench.workdir / "bots"
    real_link = os.link
    linked: list[str] = []

    def link_then_fill_the_disk(src: Any, dst: Any) -> None:
        if linked:
            raise OSError(28, "No space left on device", str(dst))
        linked.append(str(dst))
        real_link(src, dst)

    monkeypatch.setattr("botctl.store.files.os.link", link_then_fill_the_disk)
    result = bench.run("export", "--all", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "No space left on device; nothing was written" in result.stderr
    assert linked  # the first file was there before the second failed
    assert list(out.iterdir()) == []
    assert not bench.state_path.exists()
