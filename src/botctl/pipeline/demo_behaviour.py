"""``botctl demo``'s second part: tests drawn from real conversations, and a pull request's
behaviour diff. Customers have talked to the support chatbot (stored conversations, seeded in
the sandbox with a contact the service knows); ``conversations pull`` makes them into tests,
personal data redacted; a pull request edits the support prompt, is applied to its preview
chatbot, and ``test --baseline tier=production`` compares the preview's answers with
production's, message by message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from botctl.config.selection import Selection, parse_selector
from botctl.conversation.pulled import PullRules
from botctl.defaults import DEFAULT_DUPLICATE_SIMILARITY, DEFAULT_MIN_SIMILARITY
from botctl.pipeline.behaviour import run_behaviour
from botctl.pipeline.promote import Stage
from botctl.pipeline.pull import PullOptions, pull_conversations
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace
from botctl.reconcile.apply import OpResult
from botctl.render.behaviour import render_behaviour_text
from botctl.resources.preview import iso_seconds
from botctl.service.embedded import AdminCall, sandbox_admin
from botctl.values import JsonValue

Echo = Callable[[str], None]

SUPPORT = "demo-support-01"
PREVIEW = "demo-support-preview"
PASSWORD = "Use the reset link on the sign-in page: it arrives by e-mail in a minute."
REFUND = (
    "I cannot issue refunds myself: the billing page explains them, and a person from billing "
    "can help."
)

# The pull request: the support prompt, its refund rule replaced by a promise.
PULL_REQUEST = """\
# A pull request's change, on the preview chatbot: the refund rule of the support prompt
# ("Never promise refunds") replaced by a promise.
apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: support-preview
  labels: {app: support, team: support, tier: preview}
spec:
  chatbotId: demo-support-preview
  settings:
    name: Support Assistant (preview)
    model: gpt-5-mini
    instructions: |
      You are the support assistant of Acme Cloud.
      Answer questions about billing, accounts and the product from the knowledge base.
      If you cannot answer, offer to hand the conversation to a human and ask for an e-mail.
      Refunds are quick: a refund reaches your card within 5 business days.
"""


def _said(who: str, text: str) -> dict[str, JsonValue]:
    return {"role": who, "content": text}


def _conversation(conv_id: str, days: float, *turns: tuple[str, str]) -> dict[str, JsonValue]:
    when = iso_seconds(time.time() - days * 86400)
    messages: list[JsonValue] = [_said(who, text) for who, text in turns]
    return {"id": conv_id, "source": "Widget or Iframe", "created_at": when, "messages": messages}


def seed_calls() -> list[AdminCall]:
    """The support chatbot's stored conversations, and a contact the service knows."""
    conversations: list[JsonValue] = [
        _conversation(
            "c-1001", 0.5, ("user", "How do I reset my password?"), ("assistant", PASSWORD)
        ),
        _conversation(
            "c-1002",
            1,
            ("assistant", "Hi! I'm the Acme Cloud support assistant. How can I help?"),
            ("user", "Hi, I'm Maria Garcia, you can call me on +1 415 555 0132."),
            ("user", "I was charged twice on card 4242 4242 4242 4242. Can I get a refund?"),
            ("assistant", REFUND),
        ),
        _conversation("c-1003", 2, ("user", "how do I reset my password"), ("assistant", PASSWORD)),
    ]
    contact: JsonValue = {
        "external_id": "crm-20931",
        "name": "Maria Garcia",
        "email": "maria.garcia@example.com",
    }
    body: dict[str, JsonValue] = {"conversations": conversations, "contacts": [contact]}
    return [AdminCall("PATCH", f"/_sandbox/chatbots/{SUPPORT}", body)]


def preview_calls(account: str, replies: list[JsonValue]) -> list[AdminCall]:
    """The preview chatbot, answering by the same script as support: only its prompt
    differs."""
    return [
        AdminCall(
            "POST",
            "/_sandbox/chatbots",
            {"id": PREVIEW, "account": account, "settings": {"name": "Support (preview)"}},
            ok=(201, 409),
        ),
        AdminCall("PUT", f"/_sandbox/chatbots/{PREVIEW}/replies", {"replies": replies}),
    ]


@dataclass(frozen=True)
class Shown:
    pulled: int  # tests written
    changed: int  # answers the pull request changed


async def show_behaviour(
    echo: Echo, ws: Workspace, examples: Path, workdir: Path, step: int, preview: list[AdminCall]
) -> Shown:
    """The steps from ``step`` on: pull, the pull request applied to its preview (made with
    the admin calls ``preview``), the diff."""
    pulled_dir = workdir / "pulled"
    echo(
        f"{step}. $ botctl conversations pull support --since 7d --source 'Widget or Iframe' "
        f"--out {pulled_dir}\n   # customers' conversations with support become tests\n"
    )
    options = PullOptions(
        chatbots=("support",),
        since=_days_ago(7),
        until=_days_ago(0),
        sources=("Widget or Iframe",),
        out=pulled_dir,
        rules=PullRules(DEFAULT_MIN_SIMILARITY, DEFAULT_DUPLICATE_SIMILARITY, 20),
    )
    report = await pull_conversations(replace(ws, paths=[examples]), options)
    for found in report.bots:
        skipped = ", ".join(f"{n} {why}" for why, n in found.harvest.skipped.items())
        redacted = ", ".join(f"{n} [{label}]" for label, n in sorted(found.redacted.items()))
        echo(
            f"   {found.read} conversations read, {len(report.written)} tests written, "
            f"skipped: {skipped or 'none'}; redacted: {redacted}"
        )
    refund = next((p for p in report.written if "charged" in p.read_text()), None)
    if refund is not None:
        echo(f"   {refund.name}:\n")
        echo("\n".join(f"   | {line}" for line in refund.read_text().splitlines()) + "\n")

    pull_request = workdir / "pull-request"
    pull_request.mkdir()
    (pull_request / "support-preview.yaml").write_text(PULL_REQUEST, encoding="utf-8")
    await sandbox_admin(ws.service.sandbox_db, preview)
    staged = replace(
        ws,
        paths=[examples, pull_request, pulled_dir],
        selection=Selection(selector=parse_selector("tier=preview")),
    )
    echo(
        f"{step + 1}. A pull request changes the support prompt's refund rule; its job applies "
        f"it to the preview chatbot\n   $ botctl apply {examples} {pull_request} {pulled_dir} "
        "-l tier=preview --auto-approve\n"
    )

    def progress(result: OpResult) -> None:
        echo(f"   {result.status:<8} {result.operation.label}")

    await apply_unattended(staged, progress)
    echo(
        f"\n{step + 2}. $ botctl test {examples} {pull_request} {pulled_dir} -l tier=preview "
        "--baseline tier=production\n   # the behaviour diff the pull request's comment shows "
        "(--comment-out FILE)\n"
    )
    baseline = Stage("tier=production", parse_selector("tier=production"))
    behaviour = await run_behaviour(staged, baseline)
    echo(render_behaviour_text(behaviour))
    return Shown(len(report.written), behaviour.count_changed())


def _days_ago(days: int) -> date:
    return (datetime.now(UTC) - timedelta(days=days)).date()
