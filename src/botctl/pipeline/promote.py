"""``botctl promote``'s gate: the chatbots of the stage promoted from must run the configuration
as it is now, and have passed its conversation tests there (``resources.rollout``, recorded
by ``apply --test``)."""

from __future__ import annotations

from botctl.config.revision import revisions
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.store.state import load_state


def promotion_problems(ws: Workspace) -> tuple[list[str], list[str]]:
    """For the chatbots ``ws`` selects (the stage promoted from): why each may not be
    promoted (empty: all may), and the names of those that may."""
    fleet = load_resolved(ws)
    state = load_state(ws.state_path)
    current = revisions(fleet)
    covered = {name for t in fleet.tests for name in t.chatbots}
    problems, ready = [], []
    for bot in (b.spec for b in fleet.bots):
        record = state.rollout.get(bot.chatbot_id)
        revision = current[bot.chatbot_id]
        where = f"{bot.name} ({bot.chatbot_id})"
        if bot.name not in covered:
            problems.append(f"{where}: no conversation test covers it, so none passed")
        elif record is None:
            problems.append(f"{where}: no `apply --test` is recorded for it")
        elif record.revision != revision:
            problems.append(
                f"{where}: its last apply was revision {record.revision}, the configuration "
                f"is at {revision}"
            )
        elif record.tests_passed is None:
            problems.append(f"{where}: its tests did not run at revision {revision}")
        elif not record.tests_passed:
            problems.append(f"{where}: its tests failed at revision {revision}")
        else:
            ready.append(bot.name)
    return problems, ready
