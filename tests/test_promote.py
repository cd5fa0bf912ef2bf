"""The pairing rule of `botctl promote` (pure): stage keys, counterparts, refusals."""

from __future__ import annotations

from botctl.config.selection import parse_selector
from botctl.pipeline.promote import Member, Stage, pair_stages, stage_keys


def keys(source: str, target: str) -> frozenset[str]:
    return stage_keys(parse_selector(source), parse_selector(target))


def stage(text: str) -> Stage:
    return Stage(text, parse_selector(text))


def bot(name: str, **labels: str) -> Member:
    return Member(name, f"id-{name}", labels)


def pairs(
    bots: list[Member], source: str, target: str, **narrow: tuple[str, ...]
) -> tuple[list[tuple[str, str]], list[str]]:
    found = pair_stages(bots, stage(source), stage(target), **narrow)
    return [(t.name, f.name) for t, f in found.pairs], found.problems


STAGED = [
    bot("support-staging", app="support", stage="staging"),
    bot("support", app="support", stage="production"),
    bot("sales-staging", app="sales", stage="staging"),
    bot("sales", app="sales", stage="production"),
]


def test_stage_keys_are_named_by_both_selectors_differently() -> None:
    assert keys("stage=staging", "stage=production") == {"stage"}
    assert keys("stage=staging,app=support", "stage=production,app=support") == {"stage"}
    assert keys("stage=staging,app in (a,b)", "stage=production,app in (b,a)") == {"stage"}
    assert keys("stage=staging,region=eu", "stage=production") == {"stage"}  # one side only
    assert keys("stage=staging", "stage!=staging") == {"stage"}
    assert keys("stage in (qa,staging)", "stage notin (qa,staging)") == {"stage"}
    assert keys("stage", "!stage") == {"stage"}
    assert keys("env=staging", "stage=production") == frozenset()
    # What the selectors name differently is the stage, whatever its key is called.
    assert keys("app=support,stage=staging", "app=sales") == {"app"}
    # Several requirements on one key are compared as a set.
    assert keys("stage,stage!=production", "stage,stage!=staging") == {"stage"}
    assert keys("stage,stage!=x", "stage!=x,stage") == frozenset()


def test_each_target_pairs_with_its_counterpart() -> None:
    found, problems = pairs(STAGED, "stage=staging", "stage=production")
    assert problems == []
    assert found == [("support", "support-staging"), ("sales", "sales-staging")]


def test_a_target_without_a_counterpart_is_refused() -> None:
    bots = [*STAGED[:2], bot("sales", app="sales", stage="production")]
    found, problems = pairs(bots, "stage=staging", "stage=production")
    assert found == [("support", "support-staging")]
    assert problems == [
        "sales (id-sales): no chatbot of --from stage=staging has its labels apart from "
        "'stage' (app=sales): nothing of it was tested"
    ]


def test_a_label_only_the_target_has_must_match_too() -> None:
    """A production chatbot with a label its staging chatbot lacks was not tested as itself."""
    bots = [STAGED[0], bot("support", app="support", stage="production", region="eu")]
    found, problems = pairs(bots, "stage=staging", "stage=production")
    assert found == []
    assert "(app=support, region=eu): nothing of it was tested" in problems[0]


def test_a_filter_on_one_side_is_no_stage_key() -> None:
    """region narrows --from only: a production chatbot of another region is not paired with
    the eu staging chatbot (union of the keys would have paired it)."""
    bots = [
        bot("support-staging", app="support", stage="staging", region="eu"),
        bot("support-eu", app="support", stage="production", region="eu"),
        bot("support-us", app="support", stage="production", region="us"),
    ]
    found, problems = pairs(bots, "stage=staging,region=eu", "stage=production")
    assert found == [("support-eu", "support-staging")]
    assert len(problems) == 1
    assert problems[0].startswith("support-us (id-support-us): no ")


def test_two_counterparts_are_refused() -> None:
    bots = [*STAGED[:2], bot("support-qa", app="support", stage="qa")]
    found, problems = pairs(bots, "stage in (staging,qa)", "stage=production")
    assert found == []
    assert problems == [
        "support (id-support): 2 chatbots of --from stage in (staging,qa) have its labels "
        "apart from 'stage' (app=support): support-staging, support-qa; promote needs "
        "exactly one"
    ]


def test_negative_selectors_pair_and_refuse_the_unlabelled() -> None:
    bots = [*STAGED[:2], bot("billing")]
    found, problems = pairs(bots, "stage=staging", "stage!=staging")
    assert found == [("support", "support-staging")]
    assert problems == [
        "billing (id-billing): no chatbot of --from stage=staging has its labels apart from "
        "'stage' (no other label): nothing of it was tested"
    ]


def test_no_stage_key_is_refused() -> None:
    bots = [*STAGED, bot("live", tier="live")]
    found, problems = pairs(bots, "stage=staging", "tier=live")
    assert found == []
    assert len(problems) == 1
    assert problems[0].startswith("no label key tells the stages apart")


def test_empty_stages_name_the_values_in_use() -> None:
    found, problems = pairs(STAGED, "stage=stagign", "stage in (prod,production)")
    assert found == []
    assert problems == [
        "--from stage=stagign matches no chatbot: nothing of it was tested (values of "
        "'stage': production, staging; no chatbot has stage=stagign, did you mean "
        "stage=staging?)"
    ]
    _, problems = pairs(STAGED, "stage=staging", "tier=prod")
    assert problems == [
        "--to tier=prod matches no chatbot: nothing to promote (no chatbot has the label 'tier')"
    ]
    _, problems = pairs(STAGED, "stage=staging", "stag=production")
    assert "no chatbot has the label 'stag', did you mean stage?" in problems[0]


def test_a_chatbot_in_both_stages_is_refused() -> None:
    found, problems = pairs(STAGED, "app=support", "stage=production,app!=sales")
    assert found == []
    assert problems == [
        "support (id-support) is selected by both --from and --to: a stage cannot be "
        "promoted onto itself"
    ]


def test_exclude_and_target_narrow_the_target_stage() -> None:
    bots = [*STAGED[:2], bot("sales", app="sales", stage="production")]
    found, problems = pairs(bots, "stage=staging", "stage=production", excludes=("sales",))
    assert (found, problems) == ([("support", "support-staging")], [])
    found, problems = pairs(bots, "stage=staging", "stage=production", targets=("supp*",))
    assert (found, problems) == ([("support", "support-staging")], [])
    _, problems = pairs(bots, "stage=staging", "stage=production", excludes=("sale",))
    assert problems[0].startswith("--exclude 'sale' matches no chatbot")
    _, problems = pairs(bots, "stage=staging", "stage=production", targets=("support-staging",))
    assert "matches no chatbot" in problems[0]
