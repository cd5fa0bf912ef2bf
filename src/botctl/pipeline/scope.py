"""Planning only what changed (``--changed-since REF``): which chatbots a commit touches.

``scope_between`` is the rule, pure, on two resolved configurations and the state (the agent
calls it with the revision it last applied and the new one); ``scoped`` runs it for a
command: the configuration at the revision read from git, the selection applied to both.

A chatbot is in scope when, comparing *resolved* chatbots (after AttributeSets, Defaults,
interpolation; where a document sits in which file does not count):

- it was added, or its resolved configuration changed;
- its state record says a change is pending: planning it from the state alone (no reads)
  has something to send, as after an apply that failed, was interrupted or skipped it, or
  the state holds no record of it at all;
- it was removed (planned: nothing, as a full plan plans nothing for a document gone);
- its ``apiKeyEnv`` or ``chatbotId`` changed: the removal of one and the addition of the
  other (a chatbot is identified by the two).

Honest equivalence (tests/pipeline/test_scope_property.py): for a chatbot in scope, the
scoped plan says what the full plan says; for one out of scope, the full plan has no
``verified`` or ``assumed`` change that the configuration caused (drift it may have).
"""

from __future__ import annotations

from collections.abc import Sequence

from botctl.config.resolve import Fleet
from botctl.config.selection import Selection
from botctl.models import BotSpec, Desired, State
from botctl.pipeline.workspace import Workspace, collector_paused
from botctl.plan import Scope, ScopedBot, ScopeReason
from botctl.reconcile.diff import plan_bot

Key = tuple[str, str]  # (apiKeyEnv, chatbotId): what identifies a chatbot on the service


def _key(bot: BotSpec) -> Key:
    return (bot.api_key_env, bot.chatbot_id)


def _same(before: BotSpec, after: BotSpec) -> bool:
    """Whether two resolved chatbots are the same configuration (their file:line aside)."""
    return before.model_copy(update={"source": ""}) == after.model_copy(update={"source": ""})


def pending(bot: BotSpec, state: State) -> ScopeReason | None:
    """Whether the state says ``bot``'s configuration is not all applied: planned from the
    state alone, something would be sent."""
    if state.record_for(bot.chatbot_id) is None:
        return "unrecorded"
    part = plan_bot(bot, None, state, reassert=False)
    return "pending" if part.operations or part.problems else None


def scope_between(
    before: Sequence[BotSpec] | None,
    after: Sequence[BotSpec],
    state: State,
    *,
    ref: str = "",
    commit: str = "",
    problem: str | None = None,
) -> Scope:
    """The chatbots of ``after`` to plan, and those of ``before`` gone from it, each with
    why. ``before`` None: the earlier configuration is unknown (``problem`` says why), and
    every chatbot is in scope."""
    if before is None:
        reason: ScopeReason = "base-invalid"
        bots = tuple(ScopedBot(b.ref, (reason,)) for b in after)
        return Scope(ref, commit, len(after), bots, problem)
    earlier = {_key(b): b for b in before}
    later_keys = {_key(b) for b in after}
    earlier_by_name = {b.name: b for b in before}
    later_by_name = {b.name: b for b in after}
    out: list[ScopedBot] = []
    for bot in after:
        old = earlier.get(_key(bot))
        reasons: list[ScopeReason] = []
        if old is None:
            reasons.append("added")
            reasons += _moved(earlier_by_name.get(bot.name), bot)
        elif not _same(old, bot):
            reasons.append("changed")
        elif (recorded := pending(bot, state)) is not None:  # unchanged: applied?
            reasons.append(recorded)
        if reasons:
            out.append(ScopedBot(bot.ref, tuple(reasons)))
    for old in before:
        if _key(old) not in later_keys:
            gone: list[ScopeReason] = ["removed", *_moved(old, later_by_name.get(old.name))]
            out.append(ScopedBot(old.ref, tuple(gone)))
    return Scope(ref, commit, len(after), tuple(out), problem)


def _moved(old: BotSpec | None, new: BotSpec | None) -> list[ScopeReason]:
    """Why the same ``metadata.name`` is another chatbot now."""
    if old is None or new is None:
        return []
    reasons: list[ScopeReason] = []
    if old.chatbot_id != new.chatbot_id:
        reasons.append("chatbot-id-changed")
    if old.api_key_env != new.api_key_env:
        reasons.append("api-key-env-changed")
    return reasons


def _selected(fleet: Fleet, selection: Selection) -> list[BotSpec]:
    return [b.spec for b in fleet.bots if selection.covers(b.spec.name, b.spec.labels)]


def scoped(ws: Workspace, fleet: Fleet, state: State) -> tuple[Desired, Scope | None]:
    """The run's chatbots (``fleet``, selected) narrowed to those changed since
    ``ws.changed_since``, and the scope; the whole ``fleet`` without it."""
    desired = fleet.desired
    if ws.changed_since is None:
        return desired, None
    from botctl.config.gitref import find_revision, load_at_revision  # only with the option

    revision = find_revision(ws.changed_since, ws.paths)
    with collector_paused():
        then = load_at_revision(
            revision,
            ws.paths,
            environ=ws.environ,
            allow_unknown_models=ws.allow_unknown_models,
            project_file=ws.project_file if ws.paths_from_project else None,
        )
        before = _selected(then.fleet, ws.selection) if then.fleet is not None else None
        scope = scope_between(
            before,
            desired.bots,
            state,
            ref=revision.ref,
            commit=revision.commit,
            problem=then.problem,
        )
    return narrowed(desired, scope), scope


def narrowed(desired: Desired, scope: Scope) -> Desired:
    """``desired`` with only the chatbots ``scope`` plans (every chatbot the configuration
    declares is still known as declared: a live one outside the scope is not unmanaged)."""
    planned = {(b.bot.api_key_env, b.bot.chatbot_id) for b in scope.planned}
    return desired.model_copy(update={"bots": tuple(b for b in desired.bots if _key(b) in planned)})
