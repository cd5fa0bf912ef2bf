"""``test --baseline``'s pairing of the chatbots under test with their baseline counterparts
(as promote pairs), and which tests run on a pair."""

from __future__ import annotations

import pytest

from botctl.config.loader import load_fleet_from
from botctl.config.resolve import Fleet
from botctl.config.selection import Selection, parse_selector
from botctl.errors import BotctlError
from botctl.pipeline.behaviour import pair_with_baseline, paired_cases, stage_keys
from botctl.pipeline.promote import Stage


def fleet(*bots: tuple[str, str], tests: str = "") -> Fleet:
    docs = [
        f"apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"
        f"spec: {{chatbotId: id-{name}}}\n"
        for name, labels in bots
    ]
    text = "---\n".join([*docs, *([tests] if tests else [])])
    return load_fleet_from([("bots.yaml", text.encode())], environ={})


def stage(text: str) -> Stage:
    return Stage(text, parse_selector(text))


def names(
    found: Fleet, selector: str, baseline: str, **more: tuple[str, ...]
) -> list[tuple[str, str]]:
    selection = Selection(selector=parse_selector(selector) if selector else (), **more)
    pairs = pair_with_baseline(found, selection, stage(baseline)).pairs
    return [(t.name, b.name) for t, b in pairs]


STAGES = fleet(
    ("support", "app: support, stage: production"),
    ("support-preview", "app: support, stage: preview"),
    ("sales", "app: sales, stage: production"),
    ("sales-preview", "app: sales, stage: preview"),
)


def test_the_stage_keys() -> None:
    assert stage_keys(parse_selector("stage=production"), ()) == {"stage"}
    assert stage_keys(
        parse_selector("app=support,stage=production"), parse_selector("app=support,stage=preview")
    ) == {"stage"}


def test_each_chatbot_under_test_pairs_with_its_counterpart() -> None:
    assert names(STAGES, "stage=preview", "stage=production") == [
        ("support-preview", "support"),
        ("sales-preview", "sales"),
    ]
    # Without -l: every chatbot outside the baseline is under test.
    assert names(STAGES, "", "stage=production") == names(
        STAGES, "stage=preview", "stage=production"
    )
    assert names(STAGES, "", "stage=production", targets=("sales*",)) == [
        ("sales-preview", "sales")
    ]


@pytest.mark.parametrize(
    ("bots", "selector", "baseline", "message"),
    [
        (STAGES, "stage=preview", "stage=prod", "--baseline stage=prod matches no chatbot"),
        (STAGES, "stage=production", "stage=production", "every selected chatbot is a baseline"),
        (STAGES, "stage=preview,app=sales", "app=sales", "every selected chatbot is a baseline"),
        (
            fleet(("a", "stage: production"), ("b", "stage: preview, team: x")),
            "stage=preview",
            "stage=production",
            "b (id-b): no baseline chatbot has its labels apart from 'stage' (team=x)",
        ),
        (
            fleet(("a", "stage: production"), ("a2", "stage: production"), ("b", "stage: preview")),
            "stage=preview",
            "stage=production",
            "b (id-b): 2 baseline chatbots (a, a2) have its labels",
        ),
    ],
)
def test_what_cannot_be_paired_is_refused(
    bots: Fleet, selector: str, baseline: str, message: str
) -> None:
    with pytest.raises(BotctlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        names(bots, selector, baseline)


def test_a_test_of_either_side_runs_on_the_pair() -> None:
    test = (
        "apiVersion: botctl/v1\nkind: ConversationTest\nmetadata: {name: t}\n"
        "spec: {chatbots: [sales], conversation: [{role: user, content: hi}]}\n"
    )
    found = fleet(
        *[
            (b.spec.name, ", ".join(f"{k}: {v}" for k, v in b.spec.labels.items()))
            for b in STAGES.bots
        ],
        tests=test,
    )
    pairs = pair_with_baseline(found, Selection(), stage("stage=production")).pairs
    ran = [(t.name, u.name, b.name) for t, u, b in paired_cases(found.tests, pairs)]
    assert ran == [("t", "sales-preview", "sales")]
