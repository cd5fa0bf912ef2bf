"""The stages on the status page: each with its revision and gate, every text escaped."""

from __future__ import annotations

from botctl.agent.page import render_page
from botctl.agent.status import AgentStatus


def test_stages_and_a_test_failed_chatbot_on_the_page() -> None:
    status = AgentStatus("git+x")
    status.bots_in([("support-staging", "bot-s")])
    bot = status.bots["bot-s"]
    bot.set_status("TestFailed", "2026-01-01T00:00:00+00:00")
    bot.last_error = 'test refunds failed: contains "5 days": not in the answer "<b>30</b>"'
    status.stages = [
        {
            "stage": "stage=staging",
            "chatbots": ["support-staging"],
            "revision": "0123456789abcdef",
            "gate": "failed",
            "open": True,
            "reasons": ["support-staging (bot-s): its tests failed at revision sha256:1"],
            "passingSince": None,
            "opensAt": None,
        },
        {
            "stage": "stage=production",
            "chatbots": ["<script>"],
            "revision": None,
            "gate": "waiting",
            "open": False,
            "reasons": ["waiting for stage=staging to pass its tests at this revision"],
            "passingSince": None,
            "opensAt": None,
        },
    ]
    page = render_page(status.to_document(), 10)
    assert '<table id="stages">' in page
    assert "<code>0123456789ab</code>" in page
    assert '<td class="gate">failed</td>' in page
    assert "waiting for stage=staging" in page
    assert "&lt;script&gt;" in page
    assert "<script>" not in page
    assert "TestFailed" in page
    assert "&lt;b&gt;30&lt;/b&gt;" in page
    assert status.to_document()["summary"]["TestFailed"] == 1


def test_no_stages_no_table() -> None:
    assert "Stages" not in render_page(AgentStatus("x").to_document(), 10)


def test_a_chatbot_held_back_by_a_stage_says_so_in_amber_an_error_in_red() -> None:
    status = AgentStatus("git+x")
    status.bots_in([("support", "bot-p"), ("sales", "bot-x")])
    status.bots["bot-p"].held = "waiting for <stage=staging> to pass its tests"
    status.bots["bot-x"].held = "waiting for stage=staging"
    status.bots["bot-x"].last_error = "update failed: 500"
    page = render_page(status.to_document(), 10)
    assert '<td class="held">held: waiting for &lt;stage=staging&gt; to pass its tests</td>' in page
    assert '<td class="error">update failed: 500</td>' in page  # the error first
    assert "<th>Last error / held</th>" in page
