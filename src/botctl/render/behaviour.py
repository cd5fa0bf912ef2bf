"""``botctl test --baseline``'s report: per sent message the baseline's answer and the answer
of the chatbot under test, whether each met the expectations, and how much it changed
(``conversation.similarity``), the most changed first. Text, JSON (the test report's
document with fields added), Markdown (a pull-request comment under the budget, with its
marker), GitHub annotations and JUnit (the chatbots under test's results, as ``botctl
test`` writes them).

Answers are quoted from what the run kept (secrets masked), shortened, on one line, inert.
"""

from __future__ import annotations

import json
from typing import Any

from botctl.annotations import command, inert, inert_block, visible
from botctl.conversation.compare import BehaviourReport, PairResult, TurnChange
from botctl.conversation.expect import clip
from botctl.conversation.report import CaseResult, TurnResult
from botctl.defaults import COMMENT_LIMIT
from botctl.render import blocks as md
from botctl.render.tests import (
    case_document,
    render_tests_github,
    render_tests_text,
    summary,
    tests_document,
)

BEHAVIOUR_MARKER = "<!-- botctl:behaviour -->"
TEXT_QUOTE = 240  # characters of an answer in the text report
CELL_QUOTE = 400  # ... in a Markdown table cell


def behaviour_summary(report: BehaviourReport) -> str:
    total = sum(len(p.turns) for p in report.pairs)
    if not report.pairs:
        return f"Behaviour against {report.baseline}: no test covers the chatbots under test."
    return (
        f"Behaviour against {report.baseline}: {report.count_changed()} of {total} answer(s) "
        f"changed, in {len(report.pairs)} test case(s)."
    )


def _verdict(turn: TurnResult | None) -> str:
    if turn is None:
        return "not run"
    return "FAIL" if turn.failures else "PASS"


def _similarity(change: TurnChange) -> str:
    return "no answer to compare" if change.similarity is None else f"{change.similarity:.2f}"


def _side(label: str, turn: TurnResult | None, limit: int) -> list[str]:
    said = "(no answer: the run stopped before this message)"
    if turn is not None:
        said = json.dumps(clip(turn.text, limit=limit), ensure_ascii=False)
    lines = [f"      {label:<9} {_verdict(turn):<7} {said}"]
    lines += [f"                        {f}" for f in (turn.failures if turn else ())]
    return lines


def _pair_name(pair: PairResult) -> str:
    c, b = pair.candidate, pair.baseline
    return f"{c.chatbot} ({c.chatbot_id}) vs {b.chatbot} ({b.chatbot_id})"


def render_behaviour_text(report: BehaviourReport) -> str:
    """The changed answers (most changed first), then the unchanged ones counted, the
    baseline's errors, and the chatbots under test's report as ``botctl test`` prints it."""
    lines = [behaviour_summary(report), ""]
    changes = report.changes()
    for pair, change in changes:
        if not change.changed:
            continue
        lines.append(
            f"CHANGED {pair.test}  {_pair_name(pair)}  message {change.index + 1}  "
            f"similarity {_similarity(change)}"
        )
        lines.append(f"      question  {json.dumps(change.question, ensure_ascii=False)}")
        lines += _side("baseline", change.baseline, TEXT_QUOTE)
        lines += _side("now", change.candidate, TEXT_QUOTE)
    same = [(p, c) for p, c in changes if not c.changed]
    if same:
        lines.append(f"Unchanged ({len(same)}):")
        for pair, change in same:
            lines.append(
                f"SAME    {pair.test}  {_pair_name(pair)}  message {change.index + 1}  "
                f"{_verdict(change.candidate)}"
            )
    for pair in report.pairs:
        for error in pair.baseline.errors:
            lines.append(f"baseline {pair.baseline.chatbot}: {pair.test} could not run: {error}")
    body = inert("\n".join(lines)) + "\n\n"
    return body + render_tests_text(report.tests)


def behaviour_document(report: BehaviourReport) -> dict[str, Any]:
    """The test report's JSON document of the chatbots under test (``cases``, ``summary``,
    ``untested`` as ``botctl test`` prints them), with ``baseline`` and ``comparisons``
    added."""
    document = tests_document(report.tests)
    base = report.baseline_tests
    document["baseline"] = {
        "selector": report.baseline,
        "summary": tests_document(base)["summary"],
        "cases": [case_document(c) for c in base.cases],
    }
    document["comparisons"] = [_comparison(p) for p in report.pairs]
    document["summary"]["changed"] = report.count_changed()
    return document


def _turn_fields(turn: TurnResult | None, prefix: str) -> dict[str, Any]:
    def key(name: str) -> str:
        return prefix + name[0].upper() + name[1:] if prefix else name

    return {
        key("answer"): None if turn is None else turn.answer,
        key("passed"): None if turn is None else not turn.failures,
        key("failures"): [] if turn is None else list(turn.failures),
    }


def _comparison(pair: PairResult) -> dict[str, Any]:
    c, b = pair.candidate, pair.baseline
    return {
        "test": pair.test,
        "source": c.source,
        "chatbot": c.chatbot,
        "chatbotId": c.chatbot_id,
        "status": c.status,
        "baselineChatbot": b.chatbot,
        "baselineChatbotId": b.chatbot_id,
        "baselineStatus": b.status,
        "changed": pair.changed,
        "leastSimilarity": pair.least_similarity,
        "messages": [
            {
                "message": t.index + 1,
                "question": t.question,
                "similarity": t.similarity,
                "changed": t.changed,
                **_turn_fields(t.candidate, ""),
                **_turn_fields(t.baseline, "baseline"),
            }
            for t in pair.turns
        ],
    }


def render_behaviour_json(report: BehaviourReport) -> str:
    return json.dumps(behaviour_document(report), indent=2, ensure_ascii=False) + "\n"


def _cell(turn: TurnResult | None) -> str:
    if turn is None:
        return "_no answer: the run stopped before this message_"
    return md.text(clip(turn.text, limit=CELL_QUOTE))


def _met(turn: TurnResult | None) -> str:
    if turn is None:
        return "not run"
    if not turn.failures:
        return "passed"
    more = f" (+{len(turn.failures) - 1} more)" if len(turn.failures) > 1 else ""
    return f"**failed**: {md.text(visible(clip(turn.failures[0], limit=CELL_QUOTE)))}{more}"


def _change_row(pair: PairResult, change: TurnChange) -> md.Row:
    cells = [
        f"{md.code(pair.test)} message {change.index + 1}<br>{md.text(change.question)}",
        md.code(_similarity(change)),
        f"{_cell(change.baseline)}<br>_{_met(change.baseline)}_",
        f"{_cell(change.candidate)}<br>_{_met(change.candidate)}_",
    ]
    noun = "changed answer" if change.changed else "unchanged answer"
    return md.Row(("| " + " | ".join(cells) + " |",), {noun: 1})


def _pairs_line(report: BehaviourReport) -> str:
    seen = dict.fromkeys(
        f"{md.code(p.candidate.chatbot)} vs {md.code(p.baseline.chatbot)}" for p in report.pairs
    )
    return "Compared: " + ", ".join(seen) if seen else ""


def render_behaviour_markdown(report: BehaviourReport, *, limit: int | None = None) -> str:
    """The changed answers first (most changed first, both answers, whether each met the
    expectations), the unchanged ones folded, then what could not run."""
    doc = md.Budget(limit)
    doc.add(
        f"### botctl test --baseline {md.text(report.baseline)}",
        "",
        f"**{md.text(behaviour_summary(report))}** {md.text(summary(report.tests))}",
    )
    if report.pairs:
        doc.add("", _pairs_line(report))
    changes = report.changes()
    head = ["| test, message | similarity | baseline | this change |", "|---|---|---|---|"]
    changed = [_change_row(p, c) for p, c in changes if c.changed]
    same = [_change_row(p, c) for p, c in changes if not c.changed]
    note = "\n" + _cut_note()
    doc.section(["", f"**Changed answers ({len(changed)})**", "", *head], changed, [], note)
    doc.section(
        ["", f"<details><summary>Unchanged answers ({len(same)})</summary>", "", *head],
        same,
        ["", "</details>"],
        note,
    )
    errors = [_error_row(c) for p in report.pairs for c in (p.candidate, p.baseline) if c.errors]
    doc.section(["", f"**Could not run ({len(errors)})**", ""], errors, [], "- " + _cut_note())
    doc.section(
        ["", f"<details><summary>No test covers ({len(report.untested)})</summary>", ""],
        [md.Row((f"- {md.code(n)}",), {"untested chatbot": 1}) for n in report.untested],
        ["", "</details>"],
        "- " + _cut_note(),
    )
    doc.tail(_cut_note())
    return doc.render()


def _error_row(case: CaseResult) -> md.Row:
    said = "; ".join(md.text(visible(e)) for e in case.errors)
    line = f"- {md.code(case.test)} on {md.code(case.chatbot)}: {said}"
    return md.Row((line,), {"test not run": 1})


def _cut_note() -> str:
    return "_... {more} not shown, to keep this short enough to post; `botctl test` shows all._"


def render_behaviour_comment(report: BehaviourReport, *, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown report as a pull-request comment: its hidden marker first, at most
    ``limit`` characters in all."""
    body = render_behaviour_markdown(report, limit=limit - len(BEHAVIOUR_MARKER) - 1)
    return f"{BEHAVIOUR_MARKER}\n{body}"


def render_behaviour_github(report: BehaviourReport) -> str:
    """The behaviour report folded in the log, then the chatbots under test's annotations
    as ``botctl test --format github`` gives them."""
    folded = [
        command("group", "botctl test --baseline: behaviour"),
        *inert_block(render_behaviour_text(report).rstrip("\n").splitlines()),
        command("endgroup"),
    ]
    return "\n".join(folded) + "\n" + render_tests_github(report.tests)
