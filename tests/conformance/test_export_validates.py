"""`export` never writes a file that `validate` refuses (issue 9): values the service may hold
beyond botctl's rules are either accepted (a hex colour with alpha, which the contract's "hex
colour code" allows) or written in a comment and left unmanaged (a negative ipLimit, to which
the contract gives no meaning; a model newer than this botctl)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from botctl.config.export import export_document
from botctl.config.loader import load_desired
from botctl.models import LiveBot
from botctl.resources import attributes as attribute_kind
from botctl.resources.settings import ChatbotSettings, known_fields, read_live
from tests.e2e_support import KEY, Bench

HELD = {
    "name": "Support",
    "model": "gpt-9-preview",  # released after this botctl
    "ipLimit": -1,
    "ipLimitTimeframe": 60,
    "temp": 0.3,
    "styles": {"theme": "dark", "buttonColor": "#ffffff80", "userMessageColor": "#0a84ffcc"},
}


def test_export_of_off_rule_values_validates(
    sandbox_factory: Callable[..., Any], tmp_path: Path
) -> None:
    server = sandbox_factory(
        api_keys={KEY: "standard"}, reads="extended", extra_models=("gpt-9-preview",)
    )
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", settings=HELD)  # "in the dashboard", which may hold them
    out = tmp_path / "bots"

    exported = bench.run("export", "bot-1", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    (path,) = out.glob("*.yaml")
    text = path.read_text(encoding="utf-8")
    validated = bench.run("validate", str(out))
    assert validated.exit_code == 0, validated.output + text

    document = yaml.safe_load(text)
    written = document["spec"]["settings"]
    assert written["styles"] == HELD["styles"]  # accepted: the contract allows alpha
    assert "ipLimit" not in written
    assert "model" not in written
    assert "#   ipLimit: -1  (Input should be greater than or equal to 0)" in text
    assert '#   model: "gpt-9-preview"  (not in this botctl\'s model list' in text
    assert "--allow-unknown-models" in text

    # What was written is what the service holds: the next plan changes nothing of it.
    plan = bench.plan_json(str(out))
    assert [c for c in plan["changes"] if c["resource"] == "settings"] == []


# Values as the service's JSON may carry them: anything JSON can express, NaN included
# (json.loads accepts it). Text is rich in what interpolation reads: ${...}, $${, $$, the
# names of variables that are set.
_SPECIAL = ["${BOTCTL_API_KEY}", "${X:-d}", "${secret:X}", "$${", "$$", "$", "{", "}", "${"]
_text = st.lists(
    st.one_of(
        st.text(st.characters(exclude_categories=["Cs"]), max_size=4), st.sampled_from(_SPECIAL)
    ),
    max_size=5,
).map("".join)
# Set, so that an unescaped reference would resolve silently rather than fail to load.
ENVIRON = {"BOTCTL_API_KEY": "leaked-key", "X": "leaked-x"}
_json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_infinity=True, allow_nan=True),
    _text,
    st.sampled_from(["#fff", "#ffffff80", "#12345", "gpt-5-mini", "gpt-9", "public", "dark"]),
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(  # live parsing drops null members (botctl.live)
            st.sampled_from(["theme", "buttonColor", "active", "label", "title", "email", "x"]),
            inner.filter(lambda v: v is not None),
            max_size=3,
        ),
    ),
    max_leaves=6,
)
_live_settings = st.dictionaries(
    st.sampled_from(sorted(ChatbotSettings.model_fields)), _json.filter(lambda v: v is not None)
)


_attribute_records = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "number"]), "label": _text},
        optional={"description": _text, "archived": st.booleans()},
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live=_live_settings, records=_attribute_records)
# YAML line breaks besides \n, which PyYAML wrote raw and read back folded into a space.
@example(live={}, records=[{"type": "text", "label": "\x85"}])
@example(live={"instructions": "a\u2028b\r\nc\n"}, records=[{"type": "text", "label": "x\u2029"}])
def test_every_export_validates_and_keeps_what_it_writes(
    live: dict[str, Any], records: list[dict[str, Any]]
) -> None:
    """Whatever the service holds, the exported document loads without an error, and every
    setting and attribute it declares reads back exactly as the service holds it: text is
    literal, whatever ${...} it holds, with variables of those names set."""
    observed, refused = read_live(live)
    held_attributes = [{"name": f"a{i}", **record} for i, record in enumerate(records)]
    attributes, _ = attribute_kind.read_live(held_attributes)
    bot = LiveBot(chatbot_id="bot-1", settings=observed, refused=refused, attributes=attributes)
    text = export_document(bot, "bot", "BOTCTL_API_KEY")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bot.yaml"
        path.write_text(text, encoding="utf-8")
        desired = load_desired([path], environ=ENVIRON)  # raises ConfigError on any error
    (spec,) = desired.bots
    assert spec.secret_values == frozenset()
    assert [a.to_json() for a in spec.attributes] == [
        {"archived": False, **a.to_json()} for a in attributes.values()
    ]
    declared = spec.settings.json_fields
    # As read: in the write's spelling, members the contract does not have dropped.
    held = json.loads(json.dumps(known_fields(live, ChatbotSettings)))
    assert declared == {name: held[name] for name in declared}
    for name in set(held) - set(declared):
        assert f"#   {name}: " in text, name  # refused values are shown, not dropped
