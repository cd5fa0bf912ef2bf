"""The requests a plan announces are the requests its apply sends: a rename's contact reads
and updates counted, in text, Markdown and JSON, and the time at the pace the run keeps to
(--rate-limit), or that none is known. The real CLI against the sandbox over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.sandbox.server import RunningSandbox
from tests.e2e_support import Bench, bot_yaml

CARRIERS = 500  # the case: one page of contacts, 500 values to move
BOTH = "- {name: plan, type: text, label: Plan}\n- {name: score, type: number, label: Score}"
RENAMED = (
    "- {name: tier, type: text, label: Tier, renamedFrom: plan}\n"
    "- {name: score, type: number, label: Score}"
)


@pytest.fixture
def bench(sandbox: RunningSandbox, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    attributes = [
        {"name": "plan", "type": "text", "label": "Plan"},
        {"name": "score", "type": "number", "label": "Score"},
    ]
    generate = [{"count": CARRIERS, "prefix": "c", "custom_attributes": {"plan": "pro-{i}"}}]
    bench.create_bot("bot-1", attributes=attributes, generate_contacts=generate)
    bench.write("support.yaml", bot_yaml(attributes=BOTH))
    adopted = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert adopted.exit_code == 0, adopted.output
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    return bench


def test_a_rename_plan_counts_what_its_apply_sends(bench: Bench) -> None:
    document = bench.plan_json(str(bench.config_dir))
    # create tier, archive plan; one page of contacts read to copy and one to verify; an
    # update per value at most.
    assert document["requests"] == {
        "total": 2 + 2 + CARRIERS,
        "writes": 2,
        "contact_reads": 2,
        "contact_updates": CARRIERS,
        "rate_limit": None,
        "seconds": None,
    }
    assert document["summary"]["operations"] == 1  # unchanged: one operation, the rename
    bench.clear_log()
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    sent = bench.requests()
    writes = [r for r in sent if r["method"] != "GET"]
    contact_pages = [r for r in sent if r["method"] == "GET" and "/contacts" in r["path"]]
    assert len(writes) == document["requests"]["writes"] + CARRIERS
    # The apply counts again before it sends (one page), then the rename reads its two.
    assert len(contact_pages) == 1 + document["requests"]["contact_reads"]


def test_text_and_markdown_say_the_count_and_that_no_pace_is_known(bench: Bench) -> None:
    text = bench.run("plan", str(bench.config_dir))
    assert text.exit_code == 0, text.output
    assert (
        "1 to rename (504 request(s) to send: 500 contact update(s) at most, 2 contact "
        "read(s))." in text.stdout
    )
    assert "Time: not estimated: no rate limit is known (--rate-limit" in text.stdout
    markdown = bench.run("plan", "--format", "markdown", str(bench.config_dir))
    assert "(504 request(s) to send: 500 contact update(s) at most" in markdown.stdout
    assert "Time: not estimated: no rate limit is known" in markdown.stdout


def test_the_time_at_the_rate_limit(bench: Bench) -> None:
    text = bench.run("plan", "--rate-limit", "10", str(bench.config_dir))
    assert text.exit_code == 0, text.output
    assert "Time at --rate-limit 10/s per API key: about 50 s." in text.stdout
    document = json.loads(
        bench.run("plan", "--rate-limit", "10", "--format", "json", str(bench.config_dir)).stdout
    )
    assert (document["requests"]["rate_limit"], document["requests"]["seconds"]) == (10, 50.4)
    # botctl.yaml's rateLimit is the same pace.
    (bench.config_dir / "botctl.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Project\nrateLimit: 4\n", encoding="utf-8"
    )
    project = bench.run(
        "plan", "--config", str(bench.config_dir / "botctl.yaml"), str(bench.config_dir)
    )
    assert "Time at --rate-limit 4/s per API key: about 2 min 6 s." in project.stdout


def test_contacts_not_counted_say_so(bench: Bench) -> None:
    result = bench.run("plan", "--no-contact-reads", "--rate-limit", "10", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert (
        "(2 request(s) to send, and those of the contacts its renames move: not counted)"
        in result.stdout
    )
    assert "Time at --rate-limit 10/s per API key: not known" in result.stdout
    document = json.loads(
        bench.run("plan", "--no-contact-reads", "--format", "json", str(bench.config_dir)).stdout
    )
    requests = document["requests"]
    assert (requests["total"], requests["contact_updates"], requests["writes"]) == (None, None, 2)


def test_a_small_plan_without_a_pace_says_nothing_of_time(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes=BOTH, settings="name: Renamed"))
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "(1 request(s) to send)." in result.stdout
    assert "Time" not in result.stdout


def test_a_saved_plan_keeps_its_counts_and_takes_the_applying_runs_pace(bench: Bench) -> None:
    saved = bench.workdir / "rename.plan"
    assert bench.run("plan", "--out", str(saved), str(bench.config_dir)).exit_code == 0
    bench.clear_log()
    result = bench.run(
        "apply", "--state", str(bench.state_path), "--plan", str(saved), "--rate-limit", "1000"
    )
    assert result.exit_code == 0, result.output
    assert "(504 request(s) to send: 500 contact update(s) at most, 2 contact read(s))" in (
        result.stdout
    )
    assert "Time at --rate-limit 1000/s per API key: about 0.5 s." in result.stdout
    # A saved plan is applied as counted: no count again, only the rename's two pages.
    pages = [r for r in bench.requests() if r["method"] == "GET" and "/contacts" in r["path"]]
    assert len(pages) == 2
