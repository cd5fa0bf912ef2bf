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


@pytest.mark.parametrize(("creates", "archives"), [(3000, 40), (200, 2500), (5000, 0)])
def test_a_huge_plan_fits_a_comment_and_counts_what_it_left_out(
    creates: int, archives: int
) -> None:
    plan = big_plan(creates, archives)
    comment = render_plan_comment(plan)
    assert len(comment) <= COMMENT_LIMIT
    assert comment.startswith(f"{PLAN_MARKER}\n### botctl plan\n\n**Plan: {creates} to create")
    # The archives come first, in view; the other changes are folded below them.
    if archives and "Other changes" in comment:
        assert comment.index("**To archive") < comment.index("<details><summary>Other changes")
    shown_rows = len(re.findall(r"^\| bot\d \|", comment, re.MULTILINE))
    left_out = sum(
        int(n) for n in re.findall(r"_\.\.\. (\d+) more (?:changes?|archives?) not shown", comment)
    )
    assert shown_rows < creates + archives
    assert shown_rows + left_out == creates + archives
    # Well-formed to the end: every <details> closed, every fence closed.
    assert comment.count("<details>") == comment.count("</details>")
    assert comment.count("```diff") == 0 or comment.rstrip().endswith("</details>")


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
