"""Markdown, for a pull-request comment, an issue or a CI job summary: the summary, warnings
and archives in view, the rest folded. With a ``limit`` in characters (a comment's), what does
not fit is left out and counted ("... N more changes"); ``*_comment`` puts first the hidden
marker by which a CI job finds its one comment to update in place."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from botctl.defaults import COMMENT_LIMIT as COMMENT_LIMIT  # re-exported
from botctl.plan import FLAG_CUTS_OFF_USERS, SCOPE_REASONS, Change, Plan, Scope, Unmanageable
from botctl.reconcile.drift import CLASSES, DriftReport
from botctl.reconcile.usage import usage_text
from botctl.render import blocks as md
from botctl.render.text import (
    DRIFT_HEADINGS,
    FLAG_TEXT,
    PLAIN,
    READS_NONE,
    UNMANAGED_NOTE,
    by_bot,
    change_lines,
    drift_lines,
    drift_summary,
    fmt,
    missing_line,
    no_changes_line,
    pace_line,
    summary_line,
    warning_line,
)

PLAN_MARKER = "<!-- botctl:plan -->"
DRIFT_MARKER = "<!-- botctl:drift -->"
CUTS_OFF = FLAG_TEXT[FLAG_CUTS_OFF_USERS]


def render_markdown(plan: Plan, *, colour: bool = False, limit: int | None = None) -> str:
    doc = md.Budget(limit)
    doc.add("### botctl plan", "", f"**{summary_line(plan)}**")
    pace = pace_line(plan)
    if pace is not None:
        doc.add("", pace)
    if plan.reads == "none":
        doc.add("", f"> {READS_NONE}")
    _scope(doc, plan.scope, "botctl plan")
    _notes(doc, plan)
    if plan.empty:
        doc.add("", no_changes_line(plan))
    archives = [(bot, c) for bot, c in plan.changes() if c.action == "archive"]
    others = [(bot, c) for bot, c in plan.changes() if c.action != "archive"]
    columns = ["bot", "attribute", "contacts with a value", "confidence"]
    doc.section(
        ["", f"**To archive ({len(archives)})**", "", *_table_head(columns)],
        [
            _table_row(b.name, md.code(c.path), _contacts(c), c.confidence, noun="archive")
            for b, c in archives
        ],
        [],
        "\n" + _cut_note("botctl plan"),
    )
    title = f"{'Other changes' if archives else 'Changes'} ({len(others)})"
    columns = ["bot", "action", "resource", "key", "confidence"]
    doc.section(
        ["", f"<details><summary>{title}</summary>", "", *_table_head(columns)],
        [_table_row(b.name, c.action, c.resource, _key(c), c.confidence) for b, c in others],
        ["", "</details>"],
        "\n" + _cut_note("botctl plan"),
    )
    rows = _detail_rows(plan)
    opening, closing = md.fence([line for row in rows for line in row.lines], "diff")
    doc.section(
        ["", "<details><summary>Details</summary>", "", opening],
        rows,
        [closing, "", "</details>"],
        "... {more} not shown",
        counted=False,  # the tables above already said which changes they left out
    )
    doc.tail(_cut_note("botctl plan"))
    return doc.render()


def render_plan_comment(plan: Plan, *, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown plan as a pull-request comment: the hidden marker first, at most
    ``limit`` characters in all."""
    return f"{PLAN_MARKER}\n" + render_markdown(plan, limit=limit - len(PLAN_MARKER) - 1)


def _scope(doc: md.Budget, scope: Scope | None, command: str) -> None:
    """The scope of a --changed-since run: its line in view, the chatbots and why folded."""
    if scope is None:
        return
    doc.add("", f"> {scope.line(md.code)}")
    rows = [
        md.Row(
            (
                f"- {md.code(b.bot.name)} ({md.code(b.bot.chatbot_id)}): "
                + md.text(", ".join(SCOPE_REASONS[r] for r in b.reasons)),
            ),
            {"chatbot": 1},
        )
        for b in scope.bots
    ]
    doc.section(
        ["", "<details><summary>Chatbots in scope, and why</summary>", ""],
        rows,
        ["", "</details>"],
        "- " + _cut_note(command),
        counted=False,
    )


def _notes(doc: md.Budget, plan: Plan) -> None:
    flagged = [
        md.Row(
            (f"> {md.code(b.name)} {md.code(c.path)} -> {md.code(fmt(c.after))} {CUTS_OFF}",),
            {"flagged change": 1},
        )
        for b, c in plan.flagged(FLAG_CUTS_OFF_USERS)
    ]
    doc.section(["", "> [!WARNING]"], flagged, [], "> " + _cut_note("botctl plan"))
    notes = [
        md.Row(
            ("- **" + missing_line(b, md.code).replace(":", "**:", 1),),
            {"missing chatbot": 1},
        )
        for b in plan.missing
    ]
    notes += [
        md.Row((f"- **safety cap exceeded**: {md.text(v)}",), {"violation": 1})
        for v in plan.violations
    ] + [md.Row((f"- {md.text(warning_line(w))}",), {"warning": 1}) for w in plan.warnings]
    notes += unmanageable_rows(plan.unmanageable)
    doc.section([""], notes, [], "- " + _cut_note("botctl plan"))


def unmanageable_rows(items: Iterable[Unmanageable]) -> list[md.Row]:
    """Each unmanageable attribute, in view: a person must fix it where it was made."""
    return [
        md.Row(
            (
                f"- **unmanageable attribute** of {md.code(u.bot.name)}: "
                f"{md.code(u.name) if u.name is not None else '(no name)'}, "
                f"{md.text(u.reason)}; botctl never writes or archives it",
            ),
            {"unmanageable attribute": 1},
        )
        for u in items
    ]


def _table_head(columns: list[str]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _contacts(change: Change) -> str:
    if change.contacts_with_value is None:
        return md.text(f"unknown ({change.contacts_note})" if change.contacts_note else "unknown")
    return f"{change.contacts_with_value:,}"


def _key(change: Change) -> str:
    """The key cell; a rename's names and its count."""
    if change.action != "rename" or not isinstance(change.before, dict):
        return md.code(change.path)
    old = str(change.before.get("name"))
    return f"{md.code(old)} -> {md.code(change.path)} ({md.text(usage_text(change))})"


def _table_row(bot: str, *cells: str, noun: str = "change") -> md.Row:
    """One change as a table row (the chatbot's name escaped: it is the only free text)."""
    return md.Row(("| " + " | ".join([md.text(bot), *cells]) + " |",), {noun: 1})


def _cut_note(command: str) -> str:
    return f"_... {{more}} not shown, to keep this short enough to post; `{command}` shows all._"


def _detail_rows(plan: Plan) -> list[md.Row]:
    """The text rendering's body, one row per change (the first of a chatbot with its name)
    and per unmanaged attribute."""
    unmanaged = {
        name: [f"{u.resource} {u.name}" for u in group]
        for name, group in groupby(plan.unmanaged, lambda u: u.bot.name)
    }
    rows: list[md.Row] = []
    for bot, ops in by_bot(plan.operations):
        head: tuple[str, ...] = ("",) * bool(rows) + (f"{bot.name} ({bot.chatbot_id})",)
        for change in (change for op in ops for change in op.changes):
            rows.append(md.Row((*head, *change_lines(change, PLAIN)), {"change": 1}))
            head = ()
        rows.extend(_unmanaged_rows(unmanaged.pop(bot.name, [])))
    for name, names in unmanaged.items():
        rows.extend(_unmanaged_rows(names, header=("",) * bool(rows) + (name,)))
    return rows


def _unmanaged_rows(names: list[str], header: tuple[str, ...] = ()) -> list[md.Row]:
    rows = []
    for name in names:
        line = f"  ? unmanaged {name} {UNMANAGED_NOTE}"
        rows.append(md.Row((*header, line), {"unmanaged attribute": 1}))
        header = ()
    return rows


# --- drift --------------------------------------------------------------------------------------


def render_drift_markdown(
    report: DriftReport, *, colour: bool = False, limit: int | None = None
) -> str:
    """What needs a person in view (changed outside, conflicts, unknown origin, missing);
    pending changes and unmanaged attributes folded."""
    doc = md.Budget(limit)
    doc.add("### botctl drift", "", f"**{drift_summary(report)}**")
    _scope(doc, report.scope, "botctl drift")
    for drift_class in CLASSES:
        rows: list[md.Row] = []
        for bot_name, group in groupby(report.of(drift_class), lambda i: i.bot.name):
            first: tuple[str, ...] = (f"{bot_name}:",)
            for item in group:
                noun = NOUNS.get(drift_class, "change")
                rows.append(md.Row((*first, *drift_lines(item, PLAIN)), {noun: 1}))
                first = ()
        if not rows:
            continue
        heading = DRIFT_HEADINGS[drift_class]
        info = "diff" if drift_class == "pending" else "text"
        if drift_class in FOLDED:
            title = f"{heading.split(' (')[0]} ({len(rows)})"
            head, tail = ["", f"<details><summary>{md.text(title)}</summary>"], ["", "</details>"]
        else:
            head, tail = ["", f"**{md.text(heading)}**"], []
        _code_section(doc, head, rows, info, tail)
    doc.section([""], unmanageable_rows(report.unmanageable), [], "- " + _cut_note("botctl drift"))
    if report.unmanaged_chatbots:
        listed = [
            md.Row(
                (f"- {md.code(c.chatbot_id)} {md.text(c.name)} ({md.code(c.api_key_env)})",),
                {"chatbot": 1},
            )
            for c in report.unmanaged_chatbots
        ]
        title = f"Chatbots no document declares, not counted ({len(listed)})"
        doc.section(
            ["", f"<details><summary>{title}</summary>", ""],
            listed,
            ["", "</details>"],
            "- " + _cut_note("botctl drift"),
        )
    doc.tail(_cut_note("botctl drift"))
    return doc.render()


# Classes a reviewer can read later: what the next apply does, and what botctl leaves alone.
FOLDED = ("pending", "unmanaged")
NOUNS = {"missing": "missing chatbot", "unmanaged": "unmanaged attribute"}


def render_drift_comment(report: DriftReport, *, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown drift report as an issue or comment body: hidden marker, size limit."""
    return f"{DRIFT_MARKER}\n" + render_drift_markdown(report, limit=limit - len(DRIFT_MARKER) - 1)


def _code_section(
    doc: md.Budget, head: list[str], rows: list[md.Row], info: str, tail: list[str]
) -> None:
    opening, closing = md.fence([line for row in rows for line in row.lines], info)
    doc.section([*head, "", opening], rows, [closing, *tail], "... {more} not shown")
