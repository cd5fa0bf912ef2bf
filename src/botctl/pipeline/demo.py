"""``botctl demo``: the whole loop on the embedded sandbox, offline, in seconds.

Seeds two chatbots that "already exist" (configured by hand), plans and applies ``examples/``,
re-plans to nothing, makes an edit "in the dashboard", and shows drift catching it. Everything
lives in a throwaway directory; the user's own state file and keys are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import botctl
from botctl.models import Desired
from botctl.pipeline.flows import apply_unattended, make_drift, make_plan
from botctl.pipeline.workspace import Workspace, load
from botctl.reconcile.apply import OpResult
from botctl.render import render_drift, render_plan
from botctl.service.connect import resolve_keys
from botctl.service.embedded import AdminCall, bootstrap_calls, sandbox_admin
from botctl.service.options import ServiceOptions

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


def _dashboard_edit(desired: Desired) -> tuple[AdminCall, str]:
    bot = desired.bots[0]
    edit: dict[str, object] = {"settings": {"name": f"{bot.settings.name or bot.name} (renamed)"}}
    what = f"renames {bot.name!r}"
    if bot.attributes:
        attr = bot.attributes[0]
        edit["attributes"] = [{"name": attr.name, "label": f"{attr.label or attr.name} (edited)"}]
        what += f" and relabels its attribute {attr.name!r}"
    return AdminCall("PATCH", f"/_sandbox/chatbots/{bot.chatbot_id}", edit), what


async def run_demo(echo: Echo, examples: Path, workdir: Path, *, colour: bool) -> bool:
    ws = Workspace(
        paths=[examples],
        environ={},  # stand-in sandbox keys: the user's real keys are never used here
        state_path=workdir / "state.json",
        service=ServiceOptions(sandbox=True, sandbox_db=str(workdir / "sandbox.db")),
    )
    desired = load(ws)
    keys = resolve_keys([b.ref for b in desired.bots], ws.environ, sandbox=True)
    await sandbox_admin(ws.service.sandbox_db, _seed_calls(desired, keys))
    names = ", ".join(f"{b.name} ({b.chatbot_id})" for b in desired.bots)
    echo(f"1. The sandbox holds chatbots set up by hand: {names}.\n")

    echo(f"2. $ botctl plan {examples}\n")
    echo(render_plan(await make_plan(ws), "text", colour=colour))

    echo(f"3. $ botctl apply {examples} --auto-approve\n")

    def progress(result: OpResult) -> None:
        echo(f"   {result.status:<8} {result.operation.label}")

    outcome = await apply_unattended(ws, progress)
    applied_ok = outcome is not None and outcome.report.ok
    echo("")

    echo(f"4. $ botctl plan {examples}   # again: converged, nothing left to do\n")
    again = await make_plan(ws)
    echo(render_plan(again, "text", colour=colour))

    call, what = _dashboard_edit(desired)
    echo(f"5. Someone edits the dashboard: {what}.\n")
    await sandbox_admin(ws.service.sandbox_db, [call])

    echo(f"6. $ botctl drift {examples}\n")
    report = await make_drift(ws)
    echo(render_drift(report, "text", colour=colour))
    echo(
        "Next: `botctl apply` would put the dashboard edit back; `botctl sandbox serve "
        "--api-key dev` runs this sandbox as a real HTTP server; `botctl COMMAND --help` and "
        "botctl's README have the reference."
    )
    return applied_ok and again.empty and report.has_drift
