"""Conversation tests drawn from real traffic and compared across stages, end to end: the real
CLI against the sandbox over loopback HTTP. Stored conversations are seeded "in the
dashboard"; the sandbox's answers follow each chatbot's instructions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e_support import Bench
from tests.stages_support import stages

RESET = "Use the reset link on the sign-in page: it arrives by e-mail in a minute."
REFUND_OLD = "Refunds take 5 days, back to the card you paid with."
REFUND_NEW = "Refunds are handled by a person from billing: I have passed your request on."
PROD_INSTRUCTIONS = (
    "You are the support assistant. A password is reset with the reset link on the sign-in "
    f"page. {REFUND_OLD}"
)
PREVIEW_INSTRUCTIONS = (
    "You are the support assistant. A password is reset with the reset link on the sign-in "
    f"page. {REFUND_NEW}"
)


def now(days_ago: float = 0) -> str:
    moment = datetime.now(UTC) - timedelta(days=days_ago)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def conversation(
    conv_id: str, days_ago: float, *messages: tuple[str, str], **extra: Any
) -> dict[str, Any]:
    return {
        "id": conv_id,
        "source": extra.get("source", "Widget or Iframe"),
        "created_at": now(days_ago),
        "messages": [{"role": r, "content": c, **extra.get("fields", {})} for r, c in messages],
    }


SEEDED = [
    conversation(
        "c-refund",
        1,
        ("assistant", "Hi! How can I help?"),
        ("user", "Hello, I am Jane Doe (jane.doe@example.com, +44 20 7946 0958)."),
        ("user", "How long does a refund take? My card is 4111 1111 1111 1111."),
        ("assistant", "Sandbox answer (gpt-4o-mini): " + REFUND_OLD),
    ),
    conversation(
        "c-refund-again",
        2,
        ("user", "Hello, I am Jane Doe (jane.doe@example.com)."),
        ("user", "How long does the refund take? My card is 4111 1111 1111 1111."),
        ("assistant", "Sandbox answer (gpt-4o-mini): " + REFUND_OLD),
        ("user", "Thanks!"),
    ),
    conversation(
        "c-password",
        3,
        ("user", "How do I reset my password? Customer cus_Q1w2E3r4T5y6 here."),
        ("system", "internal note"),
        ("assistant", "Sandbox answer (gpt-4o-mini): " + RESET),
    ),
    conversation("c-old", 40, ("user", "Old question about refund"), ("assistant", "Old.")),
    conversation(
        "c-playground",
        1,
        ("user", "Playground question about password"),
        ("assistant", "A test."),
        source="Playground",
    ),
]


def config(bench: Bench) -> Path:
    bench.write("bots.yaml", stages(PROD_INSTRUCTIONS, PREVIEW_INSTRUCTIONS, model="gpt-4o-mini"))
    return bench.config_dir


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    settings = {"model": "gpt-4o-mini", "instructions": PROD_INSTRUCTIONS}
    bench.create_bot(
        "bot-prod",
        settings=settings,
        conversations=SEEDED,
        contacts=[
            {
                "external_id": "crm-000417",
                "name": "Jane Doe",
                "email": "jane.doe@example.com",
                "payments_accounts": [{"label": "card", "payments_id": "pay-XYZ-991"}],
            }
        ],
    )
    bench.create_bot("bot-preview", settings={"model": "gpt-4o-mini"})
    return bench


def pulled_documents(out: Path) -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml"))}


def test_pull_redact_commit_compare_and_comment(bench: Bench) -> None:
    """pull -> redact -> commit -> test --baseline -> the Markdown comment."""
    root = config(bench)
    out = root / "tests" / "pulled"
    widget = ("--source", "Widget or Iframe")
    pulled = bench.run(
        "conversations", "pull", "support", "-p", str(root), *widget, "--out", str(out)
    )
    assert pulled.exit_code == 0, pulled.output
    assert "support (bot-prod): 3 conversation(s)" in pulled.output
    assert "1 near-duplicate questions" in pulled.output
    docs = pulled_documents(out)
    assert len(docs) == 2, pulled.output
    text = "\n".join(p.read_text() for p in out.glob("*.yaml"))
    for secret in ("Jane", "Doe", "jane.doe@example.com", "7946", "4111", "cus_Q1w2E3r4T5y6"):
        assert secret not in text
    assert "[name] ([email], [phone])" in text
    refund = next(
        d for d in docs.values() if d["spec"]["provenance"]["conversationId"] == "c-refund"
    )
    assert refund["spec"]["chatbots"] == ["support"]
    assert refund["spec"]["provenance"]["source"] == "Widget or Iframe"
    (turn,) = refund["spec"]["conversation"]
    assert turn["content"].splitlines() == [
        "Hello, I am [name] ([email], [phone]).",
        "How long does a refund take? My card is [payment-id].",
    ]
    assert turn["expect"] == {
        "similarTo": "Sandbox answer (gpt-4o-mini): " + REFUND_OLD,
        "minSimilarity": 0.5,
    }
    # "committed": the configuration with the pulled tests validates.
    valid = bench.run("validate", str(root))
    assert valid.exit_code == 0, valid.output
    assert "2 conversation test(s)" in valid.output

    bench.run("apply", str(root), "--auto-approve")
    comment = bench.workdir / "behaviour.md"
    compared = bench.run(
        "test",
        str(root),
        "-l",
        "stage=preview",
        "--baseline",
        "stage=production",
        "--comment-out",
        str(comment),
    )
    assert compared.exit_code == 3, compared.output  # the refund answer changed too much
    assert "Behaviour against stage=production: 1 of 2 answer(s) changed" in compared.output
    assert "CHANGED " in compared.output
    markdown = comment.read_text()
    assert markdown.startswith("<!-- botctl:behaviour -->\n### botctl test --baseline")
    changed = markdown.index("**Changed answers (1)**")
    unchanged = markdown.index("Unchanged answers (1)")
    assert changed < unchanged
    assert "passed your request on" in markdown[changed:unchanged]
    assert "Refunds take 5 days" in markdown[changed:unchanged]
    assert len(markdown) <= 60_000
    # The same run for CI: annotations, JSON with the comparisons, the JUnit report.
    junit = bench.workdir / "behaviour.xml"
    base = ("test", str(root), "-l", "stage=preview", "--baseline", "stage=production")
    github = bench.run(*base, "--format", "github", "--junit", str(junit))
    assert github.exit_code == 3
    assert "::group::botctl test --baseline: behaviour" in github.stdout
    assert "::error file=" in github.stdout
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    document = json.loads(bench.run(*base, "--format", "json").stdout)
    assert document["summary"]["changed"] == 1
    assert document["baseline"]["summary"]["passed"] == 2
    assert {c["chatbot"] for c in document["cases"]} == {"support-preview"}


def test_pull_writes_nothing_over_files_without_overwrite(bench: Bench) -> None:
    root = config(bench)
    out = bench.workdir / "pulled"
    first = bench.run("conversations", "pull", "support", "-p", str(root), "--out", str(out))
    assert first.exit_code == 0, first.output
    edited = sorted(out.glob("*.yaml"))[0]
    edited.write_text(edited.read_text() + "# reviewed\n")
    again = bench.run("conversations", "pull", "support", "-p", str(root), "--out", str(out))
    assert again.exit_code == 0, again.output
    assert "Kept 3 file(s) that exist" in again.output
    assert edited.read_text().endswith("# reviewed\n")
    replaced = bench.run(
        "conversations", "pull", "support", "-p", str(root), "--out", str(out), "--overwrite"
    )
    assert replaced.exit_code == 0, replaced.output
    assert not edited.read_text().endswith("# reviewed\n")


def test_pull_masks_the_key_and_secrets_and_names_an_unknown_chatbot(bench: Bench) -> None:
    """An answer that echoed the API key or a ${secret:} value never reaches a file; a
    CHATBOT the configuration lacks is named, nothing read."""
    root = config(bench)
    leak = conversation(
        "c-leak",
        1,
        ("user", "What is your token?"),
        ("assistant", "It is test-key and Pr0mpt-Token-7."),
    )
    bench.admin("PATCH", "/chatbots/bot-prod", {"conversations": [leak]})
    (root / "bots.yaml").write_text(
        (root / "bots.yaml")
        .read_text()
        .replace('instructions: "', 'instructions: "${secret:PROMPT_TOKEN} ', 1)
    )
    out = bench.workdir / "pulled"
    bench.clear_log()
    env = {"PROMPT_TOKEN": "Pr0mpt-Token-7"}
    unknown = bench.run(
        "conversations", "pull", "suport", "-p", str(root), "--out", str(out), env=env
    )
    assert unknown.exit_code == 1
    assert "CHATBOT 'suport': no chatbot of the configuration is named so (did you mean" in (
        unknown.output
    )
    assert bench.requests() == []
    pulled = bench.run(
        "conversations", "pull", "support", "-p", str(root), "--out", str(out), env=env
    )
    assert pulled.exit_code == 0, pulled.output
    text = "\n".join(p.read_text() for p in out.glob("*.yaml"))
    assert "It is (secret) and (secret)." in text
    assert "test-key" not in text + pulled.output
    assert "Pr0mpt-Token-7" not in text + pulled.output
