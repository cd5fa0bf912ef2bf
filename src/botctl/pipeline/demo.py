"""``botctl demo``: the whole loop on the embedded sandbox, offline, in seconds.

Seeds chatbots that "already exist" (configured by hand): one nobody has YAML for, adopted
with ``export`` (drift is clean), and the ones ``examples/`` configures, planned and applied,
re-planned to nothing, and their conversation tests run (the sandbox answers with scripted
replies that follow the instructions). Then edits "in the dashboard" and shows drift catching
each in its class; then draws tests from the support chatbot's stored conversations and shows
a pull request's behaviour diff (``demo_behaviour``). Everything lives in a throwaway
directory; the user's own state file and keys are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import botctl
from botctl.config.export import export_documents
from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.models import Desired
from botctl.pipeline.conversations import run_conversation_tests
from botctl.pipeline.demo_behaviour import SUPPORT, preview_calls, seed_calls, show_behaviour
from botctl.pipeline.flows import (
    make_drift,
    make_plan,
    read_for_export,
    record_export,
    write_exported,
)
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace, load
from botctl.reconcile.apply import OpResult
from botctl.render import render_drift, render_plan
from botctl.render.tests import render_tests_text
from botctl.service.connect import resolve_keys
from botctl.service.embedded import AdminCall, bootstrap_calls, sandbox_admin, sandbox_key
from botctl.service.options import ServiceOptions
from botctl.values import JsonValue

Echo = Callable[[str], None]


def find_examples() -> Path | None:
    """The example configuration botctl ships, whatever the working directory: package data
    of an installed wheel (botctl/examples), else examples/ of the source checkout botctl runs
    from (src/botctl -> the repository root), where the wheel takes them from."""
    package = Path(botctl.__file__).resolve().parent
    for candidate in (package / "examples", package.parents[1] / "examples"):
        if candidate.is_dir() and any(candidate.glob("*.y*ml")):
            return candidate
    return None


def _seed_calls(desired: Desired, keys: dict[str, str]) -> list[AdminCall]:
    """The chatbots exist before botctl manages them, configured by hand in the dashboard."""
    calls = bootstrap_calls([], keys)
    for bot in desired.bots:
        calls.append(
            AdminCall(
                "POST",
                "/_sandbox/chatbots",
                {
                    "id": bot.chatbot_id,
                    "account": keys[bot.api_key_env],
                    "settings": {
                        "name": f"{bot.name} (set up by hand)",
                        "model": "gpt-4o-mini",
                        "visibility": "private",
                        "temp": 0.7,
                    },
                    "attributes": [
                        {"name": "legacy_segment", "type": "text", "label": "Legacy segment"}
                    ],
                },
                ok=(201, 409),
            )
        )
    return calls


# How the example chatbots answer in the sandbox (sandbox.scripts): each reply only while the
# chatbot's instructions say what makes it true, so a prompt change shows in `botctl test`.
_REPLIES: dict[str, list[JsonValue]] = {
    "demo-support-01": [
        {
            "pattern": "password",
            "answer": "Use the reset link on the sign-in page: it arrives by e-mail in a minute.",
            "when": {"setting": "instructions", "contains": "support assistant"},
        },
        {
            "pattern": "refund",
            "answer": "I cannot issue refunds myself: the billing page explains them, and a "
            "person from billing can help.",
            "when": {"setting": "instructions", "contains": "Never promise refunds"},
        },
        {
            "pattern": "sign in|person|human",
            "answer": "I can hand you to a person: which e-mail should they write to?",
            "when": {"setting": "instructions", "contains": "hand the conversation to a human"},
        },
    ],
    "demo-sales-01": [
        {
            "pattern": "plan|team",
            "answer": "For a team of 20 the Team plan fits best. Shall we book a demo call?",
            "when": {"setting": "instructions", "contains": "offer a demo call"},
        }
    ],
    "demo-billing-01": [
        {
            "pattern": "refund",
            "answer": "Refunds are handled by a person from our billing team: I have passed "
            "your request on.",
            "when": {"setting": "instructions", "contains": "Hand refunds to a person"},
        }
    ],
}


def _scripted_replies(desired: Desired) -> list[AdminCall]:
    return [
        AdminCall("PUT", f"/_sandbox/chatbots/{b.chatbot_id}/replies", {"replies": replies})
        for b in desired.bots
        if (replies := _REPLIES.get(b.chatbot_id))
    ]


# A chatbot nobody has written YAML for yet: the demo adopts it with `botctl export`.
ADOPTED = "faq-bot"


def _adoptable() -> list[AdminCall]:
    """The account of the default key variable, and the chatbot to adopt in it."""
    account = sandbox_key(DEFAULT_API_KEY_ENV)
    body: dict[str, JsonValue] = {
        "id": ADOPTED,
        "account": account,
        "settings": {"name": "FAQ", "model": "gpt-4o-mini", "visibility": "public"},
        "attributes": [{"name": "topic", "type": "text", "label": "Topic"}],
    }
    return [
        AdminCall("POST", "/_sandbox/accounts", {"key": account, "plan": "standard"}),
        AdminCall("POST", "/_sandbox/chatbots", body, ok=(201, 409)),
    ]


def _dashboard_edits(desired: Desired) -> tuple[list[AdminCall], str]:
    bot = desired.bots[0]
    edit: dict[str, JsonValue] = {
        "settings": {"name": f"{bot.settings.name or bot.name} (renamed)"}
    }
    what = f"renames {bot.name!r}"
    if bot.attributes:
        attr = bot.attributes[0]
        edit["attributes"] = [{"name": attr.name, "label": f"{attr.label or attr.name} (edited)"}]
        what += f" and relabels its attribute {attr.name!r}"
    adopted = {"settings": {"model": "gpt-5-mini"}}
    calls = [
        AdminCall("PATCH", f"/_sandbox/chatbots/{bot.chatbot_id}", edit),
        AdminCall("PATCH", f"/_sandbox/chatbots/{ADOPTED}", adopted),
    ]
    return calls, f"{what}, and switches the adopted {ADOPTED!r} to another model"


async def run_demo(echo: Echo, examples: Path, workdir: Path, *, colour: bool) -> bool:
    ws = Workspace(
        paths=[examples],
        environ={},  # stand-in sandbox keys: the user's real keys are never used here
        state_path=workdir / "state.json",
        service=ServiceOptions(sandbox=True, sandbox_db=str(workdir / "sandbox.db")),
    )
    desired = load(ws)
    keys = resolve_keys([b.ref for b in desired.bots], ws.environ, sandbox=True)
    seed = [
        *_seed_calls(desired, keys),
        *_scripted_replies(desired),
        *_adoptable(),
        *seed_calls(),
    ]
    await sandbox_admin(ws.service.sandbox_db, seed)
    names = ", ".join(f"{b.name} ({b.chatbot_id})" for b in desired.bots)
    echo(f"1. The sandbox holds chatbots set up by hand: {names}, and {ADOPTED}.\n")

    adopted = workdir / "adopted"
    echo(f"2. $ botctl export {ADOPTED} --out {adopted}   # adopt a chatbot that exists\n")
    env = DEFAULT_API_KEY_ENV
    found, listed = await read_for_export([ADOPTED], env, ws.environ, ws.service)
    exported = export_documents(found, listed, env)
    for path in write_exported(adopted, exported):
        echo(f"   wrote {path.name}")
    record_export(ws.state_path, 0.0, exported, env)
    echo("")
    adopting = replace(ws, paths=[adopted])
    echo(f"3. $ botctl drift {adopted}   # the baseline export recorded: nothing to report\n")
    clean = await make_drift(adopting)
    echo(render_drift(clean, "text", colour=colour))

    echo(f"4. $ botctl plan {examples}\n")
    echo(render_plan(await make_plan(ws), "text", colour=colour))

    echo(f"5. $ botctl apply {examples} --auto-approve\n")

    def progress(result: OpResult) -> None:
        echo(f"   {result.status:<8} {result.operation.label}")

    outcome = await apply_unattended(ws, progress)
    applied_ok = outcome.report.ok
    echo("")

    echo(f"6. $ botctl plan {examples}   # again: converged, nothing left to do\n")
    again = await make_plan(ws)
    echo(render_plan(again, "text", colour=colour))

    echo(f"7. $ botctl test {examples}   # how the chatbots now answer (examples/tests/)\n")
    tested = await run_conversation_tests(ws)
    echo(render_tests_text(tested))

    calls, what = _dashboard_edits(desired)
    echo(f"8. Someone edits the dashboard: {what}.\n")
    await sandbox_admin(ws.service.sandbox_db, calls)

    everything = replace(ws, paths=[examples, adopted])
    echo(f"9. $ botctl drift {examples} {adopted}\n")
    report = await make_drift(everything)
    echo(render_drift(report, "text", colour=colour))
    preview = preview_calls(keys[DEFAULT_API_KEY_ENV], _REPLIES[SUPPORT])
    shown = await show_behaviour(echo, ws, examples, workdir, 10, preview)
    echo(
        "Next: `botctl apply` would put the dashboard edits back; `botctl sandbox serve "
        "--api-key dev` runs this sandbox as a real HTTP server; `botctl COMMAND --help` and "
        "botctl's README have the reference."
    )
    caught = {item.bot.chatbot_id for item in report.of("changed_outside")}
    expected = {ADOPTED, *(b.chatbot_id for b in desired.bots[:1])}
    return (
        applied_ok
        and not clean.has_drift
        and again.empty
        and tested.passed
        and bool(tested.cases)
        and caught == expected
        and shown.pulled > 0
        and shown.changed > 0
    )
