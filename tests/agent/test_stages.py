"""The agent's gates and stages, pure (``agent.stages``): which chatbots a revision may reach,
from the staged-rollout record, as ``botctl promote`` would allow, with the soak."""

from __future__ import annotations

import pytest

from botctl.agent.stages import (
    SoakClock,
    failed_at,
    gate_document,
    parse_stages,
    staging,
    untested,
)
from botctl.errors import BotctlError
from botctl.pipeline.promote import Member
from botctl.resources.rollout import Rollout

STAGES = parse_stages("stage=staging,stage=production")
STAGING = Member("support-staging", "bot-s", {"app": "support", "stage": "staging"})
PRODUCTION = Member("support", "bot-p", {"app": "support", "stage": "production"})
JUDGE = Member("judge", "bot-j", {})
MEMBERS = [STAGING, PRODUCTION, JUDGE]
CURRENT = {"bot-s": "sha256:s2", "bot-p": "sha256:p2", "bot-j": "sha256:j1"}
COVERED = {"support-staging", "support"}


def test_parse_stages_one_requirement_each_in_order() -> None:
    stages = parse_stages("stage in (qa,staging), stage=production,tier!=canary")
    assert [s.text for s in stages] == ["stage in (qa,staging)", "stage=production", "tier!=canary"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("stage=staging", "names one stage"),
        ("stage=a,stage=a", "named twice"),
        ("stage=,=x", "--stages"),
        ("", "--stages"),
    ],
)
def test_parse_stages_refuses(text: str, says: str) -> None:
    with pytest.raises(BotctlError, match=says):
        parse_stages(text)


def test_a_new_revision_reaches_the_first_stage_only() -> None:
    rollout = {"bot-s": Rollout("sha256:s1", True), "bot-p": Rollout("sha256:p1", True)}
    found = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout)
    assert found.admits("bot-s")
    assert not found.admits("bot-p")
    assert found.admits("bot-j")  # no stage selects it: not staged
    assert [g.result for g in found.gates] == ["pending", "waiting"]
    assert "waiting for stage=staging" in (found.held("bot-p") or "")


def test_the_next_stage_opens_once_the_stage_before_passed_at_its_revision() -> None:
    rollout = {"bot-s": Rollout("sha256:s2", True), "bot-p": Rollout("sha256:p1", True)}
    found = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout)
    assert found.admits("bot-p")
    assert [g.result for g in found.gates] == ["passed", "pending"]


def test_a_failed_stage_holds_the_next_and_its_own_chatbot() -> None:
    rollout = {"bot-s": Rollout("sha256:s2", False)}
    found = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout)
    assert found.failed == {"bot-s"}
    assert not found.admits("bot-s")
    assert not found.admits("bot-p")
    assert "tests failed" in (found.held("bot-s") or "")
    assert [g.result for g in found.gates] == ["failed", "waiting"]
    assert any("its tests failed at revision sha256:s2" in w for w in found.gates[0].waiting)


def test_a_failure_at_an_older_revision_holds_nothing() -> None:
    assert failed_at({"bot-s": Rollout("sha256:s1", False)}, CURRENT) == frozenset()
    found = staging((), MEMBERS, CURRENT, COVERED, {"bot-s": Rollout("sha256:s1", False)})
    assert all(found.admits(m.chatbot_id) for m in MEMBERS)


def test_without_stages_only_failed_chatbots_are_held() -> None:
    found = staging((), MEMBERS, CURRENT, COVERED, {"bot-p": Rollout("sha256:p2", False)})
    assert not found.admits("bot-p")
    assert found.admits("bot-s")
    assert found.gates == ()


def test_the_soak_holds_the_next_stage_until_it_ends() -> None:
    rollout = {"bot-s": Rollout("sha256:s2", True)}
    clock = SoakClock()
    early = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout, soak=60, clock=clock, now=1000)
    assert not early.admits("bot-p")
    assert early.gates[1].result == "soaking"
    assert early.next_opening() == 1060
    assert "soaking" in early.gates[1].reasons()[0]
    still = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout, soak=60, clock=clock, now=1059)
    assert not still.admits("bot-p")
    done = staging(STAGES, MEMBERS, CURRENT, COVERED, rollout, soak=60, clock=clock, now=1060)
    assert done.admits("bot-p")
    assert done.next_opening() is None


def test_the_soak_starts_again_at_a_new_revision_of_the_stage() -> None:
    clock = SoakClock()
    passed = {"bot-s": Rollout("sha256:s2", True)}
    staging(STAGES, MEMBERS, CURRENT, COVERED, passed, soak=60, clock=clock, now=1000)
    newer = {**CURRENT, "bot-s": "sha256:s3"}
    again = {"bot-s": Rollout("sha256:s3", True)}
    found = staging(STAGES, MEMBERS, newer, COVERED, again, soak=60, clock=clock, now=1100)
    assert found.next_opening() == 1160


def test_promotes_refusals_hold_the_next_stage() -> None:
    twin = Member("support-2", "bot-s2", {"app": "support", "stage": "staging"})
    current = {**CURRENT, "bot-s2": "sha256:t"}
    rollout = {"bot-s": Rollout("sha256:s2", True), "bot-s2": Rollout("sha256:t", True)}
    covered = {*COVERED, "support-2"}
    found = staging(STAGES, [*MEMBERS, twin], current, covered, rollout)
    assert not found.admits("bot-p")
    gate = found.gates[1]
    assert gate.result == "refused"
    assert "promote --from stage=staging --to stage=production" in gate.reasons()[0]
    assert "promote needs exactly one" in gate.reasons()[0]


def test_an_untested_stage_never_opens_the_next() -> None:
    found = staging(STAGES, MEMBERS, CURRENT, {"support"}, {})
    assert not found.admits("bot-p")
    assert "no conversation test covers it" in found.gates[0].waiting[0]


COVERED_IDS = {"bot-s", "bot-p"}


@pytest.mark.parametrize(
    ("record", "due"),
    [
        (None, True),  # never tested
        (Rollout("sha256:s2"), True),  # applied at this revision, its tests not run
        (Rollout("sha256:s2", True), False),
        (Rollout("sha256:s2", False), False),  # failed: held, not tested again
        (Rollout("sha256:s1", True), True),  # an older revision's verdict (a test changed)
    ],
)
def test_a_chatbot_without_a_verdict_at_its_revision_is_untested(
    record: Rollout | None, due: bool
) -> None:
    rollout = {} if record is None else {"bot-s": record}
    assert ("bot-s" in untested(CURRENT, COVERED_IDS, rollout)) is due
    assert "bot-j" not in untested(CURRENT, COVERED_IDS, rollout)  # no test covers it


def test_a_chatbot_the_state_records_at_other_values_is_not_untested() -> None:
    """CI applied and tested a commit the agent has not fetched yet (its record is at CI's
    revision, the state holds CI's values): a pass "for its tests" would write the agent's
    older revision over CI's. A stage's chatbot held back is the same: it gets the revision
    when its stage opens, not as untested."""
    rollout = {"bot-s": Rollout("sha256:s9", True), "bot-p": Rollout("sha256:p1", True)}
    assert untested(CURRENT, COVERED_IDS, rollout) == {"bot-s", "bot-p"}
    assert untested(CURRENT, COVERED_IDS, rollout, elsewhere={"bot-s", "bot-p"}) == set()
    rollout["bot-s"] = Rollout("sha256:s2")  # applied at this revision: its tests run
    assert untested(CURRENT, COVERED_IDS, rollout, elsewhere={"bot-p"}) == {"bot-s"}


def test_gate_document() -> None:
    found = staging(STAGES, MEMBERS, CURRENT, COVERED, {"bot-s": Rollout("sha256:s2", True)})
    document = gate_document(found.gates[0], "abc")
    assert document["stage"] == "stage=staging"
    assert document["chatbots"] == ["support-staging"]
    assert document["revision"] == "abc"
    assert document["gate"] == "passed"
    assert document["passingSince"] is not None
    assert found.stage_of("bot-p") is found.gates[1]
    assert found.stage_of("bot-j") is None
