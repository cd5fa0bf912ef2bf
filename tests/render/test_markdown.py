"""Markdown for comments: escaping that shows text as written, fences nothing closes, and the
60,000-character cap (summary and archives first, the rest folded, "... N more" when cut)."""

from __future__ import annotations

import re

import pytest

from botctl.plan import BotRef, Change, Operation, OperationKind, Plan
from botctl.reconcile.drift import DriftItem, DriftReport
from botctl.render import blocks as md
from botctl.render.markdown import (
    COMMENT_LIMIT,
    DRIFT_MARKER,
    PLAN_MARKER,
    render_drift_comment,
    render_markdown,
    render_plan_comment,
)


def bot_ref(i: int) -> BotRef:
    return BotRef(f"bot{i % 7}", f"bot-{i % 7}", "BOTCTL_API_KEY")


def attribute_op(i: int, action: str, label: str = "Label") -> Operation:
    after = {"name": f"attr_{i:05d}", "type": "text", "label": f"{label} {i}", "archived": False}
    change = Change(
        resource="attribute",
        path=f"attr_{i:05d}",
        action=action,  # type: ignore[arg-type]
        before=None if action == "create" else {**after, "archived": action != "archive"},
        after=after if action != "archive" else {**after, "archived": True},
        confidence="verified",
    )
    kind: OperationKind = "create_attribute" if action == "create" else "update_attribute"
    return Operation(bot_ref(i), kind, change.path, {}, {}, (change,))


def big_plan(creates: int, archives: int) -> Plan:
    ops = [attribute_op(i, "create", "A long label " * 5) for i in range(creates)]
    ops += [attribute_op(creates + i, "archive") for i in range(archives)]
    return Plan(operations=tuple(ops))


def test_text_escapes_what_markdown_or_github_would_act_on() -> None:
    assert md.text("*bold* [x](y) <b> @team #1 a|b") == (r"\*bold\* \[x\](y) \<b\> \@team \#1 a\|b")
    assert md.text("two\nlines") == "two lines"
    assert md.text("plain words, fine: 1.") == "plain words, fine: 1."


def test_code_span_and_fence_outgrow_any_backticks_inside() -> None:
    assert md.code("a") == "`a`"
    assert md.code("a`b") == "``a`b``"
    assert md.code("`x`") == "`` `x` ``"
    assert md.code("a|b") == r"`a\|b`"
    opening, closing = md.fence(["```", "````` end"], "diff")
    assert opening == "``````diff"
    assert closing == "``````"


def test_a_small_plan_is_never_cut() -> None:
    plan = big_plan(20, 3)
    assert "more" not in render_plan_comment(plan)
    assert render_plan_comment(plan) == f"{PLAN_MARKER}\n" + render_markdown(plan)


def text_op(i: int) -> Operation:
    """A settings text changed: shown as a diff in a fenced block when the comment has room."""
    change = Change(
        resource="settings",
        path="instructions",
        action="update",
        before=f"Be brief.\nAnswer {i} in English.\nNever guess.",
        after=f"Be brief.\nAnswer {i} in the user's language.\nNever guess.",
        confidence="verified",
    )
    return Operation(bot_ref(i), "update_settings", "settings", {}, {}, (change,))


@pytest.mark.parametrize(
    ("creates", "archives", "texts", "folded"),
    [
        (3000, 40, 0, True),  # archives in view, the creates folded below them
        (200, 2500, 0, False),  # the archives alone fill the comment: nothing else shown
        (5000, 0, 0, True),  # no archive: the creates folded
        (3000, 40, 6, True),  # text diffs too: cut with the rest, never left open
    ],
)
def test_a_huge_plan_fits_a_comment_and_counts_what_it_left_out(
    creates: int, archives: int, texts: int, folded: bool
) -> None:
    plan = big_plan(creates, archives)
    plan = Plan(operations=tuple(text_op(i) for i in range(texts)) + plan.operations)
    comment = render_plan_comment(plan)
    assert len(comment) <= COMMENT_LIMIT
    updates = f"{texts} to update, " if texts else "0 to update, "
    assert comment.startswith(
        f"{PLAN_MARKER}\n### botctl plan\n\n**Plan: {creates} to create, {updates}"
    )
    # The archives come first, in view; the other changes are folded below them.
    archive_table = comment.find(f"**To archive ({archives})**")
    assert (archive_table >= 0) == (archives > 0)
    folded_at = comment.find("<details><summary>")
    assert (folded_at >= 0) == folded
    if archives and folded:  # the first and last cases
        assert archive_table < folded_at
    shown_rows = len(re.findall(r"^\| bot\d \|", comment, re.MULTILINE))
    left_out = sum(
        int(n) for n in re.findall(r"_\.\.\. (\d+) more (?:changes?|archives?) not shown", comment)
    )
    assert shown_rows < creates + archives + texts
    assert shown_rows + left_out == creates + archives + texts
    # Well-formed to the end: every <details> closed, every fence that opens closes.
    assert comment.count("<details>") == comment.count("</details>")
    fences = re.findall(r"^(`{3,})", comment, re.MULTILINE)
    assert len(fences) % 2 == 0
    assert comment.rstrip().endswith("</details>") == folded


def test_archives_are_listed_before_anything_is_cut() -> None:
    comment = render_plan_comment(big_plan(4000, 30))
    archive_table = comment.split("**To archive (30)**")[1].split("<details>")[0]
    assert len(re.findall(r"^\| bot\d \|", archive_table, re.MULTILINE)) == 30


def test_the_limit_is_exact_for_any_size() -> None:
    plan = big_plan(400, 50)
    for limit in (1_000, 5_000, 20_000):
        comment = render_plan_comment(plan, limit=limit)
        assert len(comment) <= limit
        assert "more" in comment


def test_hostile_values_cannot_break_out_of_the_details_block() -> None:
    change = Change(
        resource="settings",
        path="name",
        action="update",
        before="```\n</details><!-- botctl:plan --> @everyone",
        after="x",
        confidence="verified",
    )
    op = Operation(
        BotRef("support", "bot-1", "K"), "update_settings", "settings", {}, {}, (change,)
    )
    text = render_markdown(Plan(operations=(op,)))
    opening = next(line for line in text.splitlines() if line.startswith("````"))
    assert opening == "````diff"  # one backtick more than the value holds


def test_drift_comment_keeps_changes_outside_botctl_first() -> None:
    outside = tuple(
        DriftItem(
            BotRef(f"bot{i:04d}", f"bot-{i}", "K"),
            "changed_outside",
            "settings",
            "name",
            live="b" * 50,
            last_applied="a" * 50,
            basis="verified",
        )
        for i in range(2000)
    )
    unmanaged = tuple(
        DriftItem(BotRef("bot1", "bot-1", "K"), "unmanaged", "attribute", f"x{i}")
        for i in range(50)
    )
    report = DriftReport(outside + unmanaged, 0, ())
    comment = render_drift_comment(report)
    assert comment.startswith(f"{DRIFT_MARKER}\n### botctl drift\n\n**Drift detected: 2000")
    assert len(comment) <= COMMENT_LIMIT
    shown = len(re.findall(r"^  ! settings name", comment, re.MULTILINE))
    (cut,) = re.findall(r"^\.\.\. (\d+) more changes not shown$", comment, re.MULTILINE)
    assert shown + int(cut) == 2000
    # The unmanaged attributes, folded after them, did not fit: the comment says so.
    assert "... 50 more unmanaged attributes not shown" in comment
