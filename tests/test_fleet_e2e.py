"""End-to-end: a fleet configured with AttributeSets, Defaults and a project file, driven through
the real CLI against the sandbox over HTTP on loopback. The central claim: resolution happens
in the configuration only, so a fleet sends exactly the requests its fully expanded YAML would.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from botctl.cli import cli
from botctl.config.loader import load_desired
from tests.conftest import SandboxFactory
from tests.e2e_support import KEY, Bench, bot_yaml

ROOT = Path(__file__).resolve().parents[1]
FLEET_FIXTURE = ROOT / "tests" / "fixtures" / "fleet"
GOLDEN = ROOT / "tests" / "golden"
OTHER_KEY = "other-account-key"

# --- the 40-bot fleet: two sets, three defaults, labels over two accounts ----------------------

SETS: dict[str, list[dict[str, Any]]] = {
    "crm-core": [
        {"name": "plan_tier", "type": "text", "label": "Plan tier"},
        {"name": "seats", "type": "number", "label": "Seats", "description": "Paid seats"},
        {"name": "churn_risk", "type": "boolean", "label": "Churn risk"},
        {"name": "renewal_date", "type": "date", "label": "Renewal date"},
    ],
    "billing": [
        {"name": "invoice_due", "type": "date", "label": "Invoice due"},
        {"name": "payment_method", "type": "text", "label": "Payment method"},
    ],
}
# name, selector, what it gives (in document order: later ones win over earlier ones)
DEFAULTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "all-bots",
        {},
        {
            "settings": {
                "model": "gpt-5-mini",
                "temp": 0.3,
                "visibility": "public",
                "styles": {"theme": "dark", "buttonColor": "#000000"},
            }
        },
    ),
    (
        "eu",
        {"matchLabels": {"region": "eu"}},
        {
            "settings": {
                "styles": {"buttonColor": "#0a84ff", "alignChatButton": "left"},
                "collectCustomerInformation": {
                    "title": "Can we reach you?",
                    "email": {"active": True, "label": "E-mail"},
                },
                "domains": ["eu.example"],
            },
            "attributeSets": ["billing"],
        },
    ),
    (
        "support-team",
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["support"]}]},
        {
            "settings": {"temp": 0.1},
            "attributeSets": ["crm-core"],
            "ignoreAttributes": ["legacy"],
            "safety": {"maxArchivePercent": 50},
        },
    ),
]


def labels_of(i: int) -> dict[str, str]:
    return {"region": "eu" if i % 2 == 0 else "us", "team": "support" if i % 3 else "sales"}


def own_spec(i: int) -> dict[str, Any]:
    """The chatbot's own spec: some override defaults, some include or override sets."""
    settings: dict[str, Any] = {"name": f"Bot {i}"}
    if i % 5 == 0:
        settings["temp"] = 0.9
    if i % 7 == 0:
        settings["styles"] = {"buttonColor": "#123456"}
    if i % 4 == 0:
        settings["collectCustomerInformation"] = {"email": {"label": "Your e-mail"}}
    if i % 9 == 0:
        settings["domains"] = ["own.example", "eu.example"]
    spec: dict[str, Any] = {
        "chatbotId": f"fleet-{i:02d}",
        "settings": settings,
    }
    if i % 10 == 3:
        spec["apiKeyEnv"] = "OTHER_KEY"
    if i % 8 == 0:
        spec["attributeSets"] = ["crm-core"]
    if i % 6 == 1:
        spec["customAttributes"] = [
            {"name": "plan_tier", "type": "text", "label": f"Plan of bot {i}"},
            {"name": f"own_{i}", "type": "text", "label": "Own"},
        ]
    if i % 11 == 0:
        spec["prune"] = False
    if i % 13 == 0:
        spec["ignoreAttributes"] = ["legacy", f"tmp_{i}_*"]
    return spec


def merge(target: dict[str, Any], layer: dict[str, Any]) -> None:
    """The documented rule, written out independently: mappings merge, anything else replaces."""
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    return all(labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", []))


def expanded(i: int) -> dict[str, Any]:
    """Bot i as one self-contained Chatbot document, the way it would be written without
    sets or defaults."""
    labels, own = labels_of(i), own_spec(i)
    spec: dict[str, Any] = {}
    sets: list[str] = []
    ignored: list[str] = []
    added = ("attributeSets", "ignoreAttributes", "customAttributes")  # not merged: added up
    for _, selector, given in DEFAULTS:
        if matches(selector, labels):
            merge(spec, {k: v for k, v in given.items() if k not in added})
            sets += given.get("attributeSets", [])
            ignored += given.get("ignoreAttributes", [])
    merge(spec, {k: v for k, v in own.items() if k not in added})
    sets += own.get("attributeSets", [])
    ignored += own.get("ignoreAttributes", [])
    if ignored:
        spec["ignoreAttributes"] = list(dict.fromkeys(ignored))
    own_attributes = own.get("customAttributes", [])
    own_names = {a["name"] for a in own_attributes}
    attributes = [
        a for name in dict.fromkeys(sets) for a in SETS[name] if a["name"] not in own_names
    ]
    spec["customAttributes"] = attributes + own_attributes
    return document("Chatbot", f"bot-{i:02d}", spec, labels)


def document(
    kind: str, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "botctl/v1", "kind": kind, "metadata": metadata, "spec": spec}


def write_fleet(directory: Path) -> None:
    (directory / "bots").mkdir(parents=True)
    for i in range(40):
        bot = document("Chatbot", f"bot-{i:02d}", own_spec(i), labels_of(i))
        (directory / "bots" / f"bot-{i:02d}.yaml").write_text(yaml.safe_dump(bot, sort_keys=False))
    sets = [document("AttributeSet", n, {"customAttributes": a}) for n, a in SETS.items()]
    (directory / "sets.yaml").write_text(yaml.safe_dump_all(sets, sort_keys=False))
    defaults = [document("Defaults", n, {"selector": s, **g}) for n, s, g in DEFAULTS]
    (directory / "defaults.yaml").write_text(yaml.safe_dump_all(defaults, sort_keys=False))


def write_expanded(directory: Path) -> None:
    directory.mkdir(parents=True)
    for i in range(40):
        (directory / f"bot-{i:02d}.yaml").write_text(yaml.safe_dump(expanded(i), sort_keys=False))


def fleet_sandbox(factory: SandboxFactory) -> Bench:
    server = factory(api_keys={KEY: "unlimited", OTHER_KEY: "unlimited"})
    bench = Bench(url=server.url, api_url=server.api_url, workdir=Path(server.url and "."))
    for i in range(40):
        account = OTHER_KEY if i % 10 == 3 else KEY
        bench.create_bot(
            f"fleet-{i:02d}",
            account=account,
            settings={"name": "Set up by hand", "model": "gpt-4o-mini", "temp": 0.7},
            attributes=[{"name": "legacy", "type": "text", "label": "Legacy"}],
        )
    return bench


def run(bench: Bench, state: Path, *args: str) -> Result:
    env = {"OTHER_KEY": OTHER_KEY}
    return bench.run(*args[:1], "--state", str(state), "--parallelism", "1", *args[1:], env=env)


def requests_of(bench: Bench) -> list[tuple[Any, ...]]:
    return [
        (r["method"], r["path"], json.dumps(r["query"], sort_keys=True), json.dumps(r["body"]))
        for r in bench.requests()
    ]


def test_forty_bots_sharing_sets_and_defaults_send_what_the_expanded_yaml_sends(
    sandbox_factory: SandboxFactory, tmp_path: Path
) -> None:
    fleet_dir, expanded_dir = tmp_path / "fleet", tmp_path / "expanded"
    write_fleet(fleet_dir)
    write_expanded(expanded_dir)
    # The two configurations resolve to the same chatbots (the expanded one without sets).
    environ = {"OTHER_KEY": OTHER_KEY}
    resolved = load_desired([fleet_dir], environ=environ)
    written_out = load_desired([expanded_dir], environ=environ)
    strip = {"source"}
    assert [b.model_dump(exclude=strip) for b in resolved.bots] == [
        b.model_dump(exclude=strip) for b in written_out.bots
    ]

    outcomes = {}
    for name, config in (("fleet", fleet_dir), ("expanded", expanded_dir)):
        bench = fleet_sandbox(sandbox_factory)
        state = tmp_path / f"{name}.state.json"
        bench.clear_log()
        plan = run(bench, state, "plan", "--format", "json", str(config))
        assert plan.exit_code == 0, plan.output
        applied = run(bench, state, "apply", "--auto-approve", str(config))
        assert applied.exit_code == 0, applied.output
        log = requests_of(bench)
        again = run(bench, state, "plan", "--format", "json", "--detailed-exitcode", str(config))
        assert again.exit_code == 0, again.output  # converged
        world = bench.admin("GET", "/state")
        outcomes[name] = (json.loads(plan.stdout), log, without_timestamps(world["chatbots"]))

    fleet_plan, fleet_log, fleet_world = outcomes["fleet"]
    expanded_plan, expanded_log, expanded_world = outcomes["expanded"]
    assert fleet_plan["changes"] == expanded_plan["changes"]
    assert fleet_plan["summary"] == expanded_plan["summary"]
    assert fleet_plan["unmanaged"] == expanded_plan["unmanaged"]
    assert 0 < len(fleet_plan["unmanaged"]) < 40  # "legacy" is ignored where defaults say so
    # Request by request, in order (one chatbot at a time, so the order is deterministic).
    assert len(fleet_log) == len(expanded_log)
    for n, (a, b) in enumerate(zip(fleet_log, expanded_log, strict=True)):
        assert a == b, f"request {n} differs"
    writes = [r for r in fleet_log if r[0] != "GET"]
    assert len(writes) > 150  # real work: 40 settings updates, attribute creates and archives
    assert fleet_world == expanded_world
    # The overrides are said once per chatbot that overrides, in the plan's warnings.
    overriding = [i for i in range(40) if own_spec(i).get("customAttributes")]
    overrides = [w for w in fleet_plan["warnings"] if "[BC201]" in w]
    assert len(overrides) == len([i for i in overriding if "crm-core" in expanded_sets(i)])


def without_timestamps(value: Any) -> Any:
    """The sandbox's world, minus when things happened (two runs differ in that only)."""
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k not in TIMESTAMPS}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value


TIMESTAMPS = {"created_at", "updated_at", "createdAt", "updatedAt"}


def expanded_sets(i: int) -> list[str]:
    labels = labels_of(i)
    sets = [s for _, sel, g in DEFAULTS if matches(sel, labels) for s in g.get("attributeSets", [])]
    own: list[str] = own_spec(i).get("attributeSets", [])
    return sets + own


# --- botctl render ---------------------------------------------------------------------------


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={"NO_COLOR": "1", **(env or {})})


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("BOTCTL_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


RENDER_ENV = {"CRM_TOKEN": "tok-5ecret", "REGION_NAME": "Europe"}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_render_golden(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # From the fixture's directory, with no PATH: the project file there names the paths.
    monkeypatch.chdir(FLEET_FIXTURE)
    result = invoke("render", "--format", fmt, env=RENDER_ENV)
    assert result.exit_code == 0, result.output
    assert "tok-5ecret" not in result.output
    check_golden(f"render.{fmt}", result.stdout)
    assert result.stderr.count("warning[BC201]") == 1


def test_render_selects_like_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FLEET_FIXTURE)
    result = invoke("render", "--format", "json", "-l", "region=eu", env=RENDER_ENV)
    assert result.exit_code == 0, result.output
    assert [c["name"] for c in json.loads(result.stdout)["chatbots"]] == ["support"]
    none = invoke("render", "-l", "region=apac", env=RENDER_ENV)
    assert none.exit_code == 1
    assert "no chatbot has region=apac" in none.stderr


def test_rendered_yaml_is_a_configuration_of_the_same_chatbots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    examples = Path("examples")
    result = invoke("render", str(examples))
    assert result.exit_code == 0, result.output
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(result.stdout)
    again = load_desired([rendered], environ={})
    original = load_desired([examples], environ={})
    strip = {"source"}
    assert [b.model_dump(exclude=strip) for b in again.bots] == [
        b.model_dump(exclude=strip) for b in original.bots
    ]
    assert "# from examples/defaults/production.yaml:" in result.stdout


def test_rendered_yaml_keeps_text_literal(tmp_path: Path) -> None:
    """Text that holds ${...} once resolved (from an escape, or from a variable's value) is
    rendered escaped: loading the render gives that text, never a variable of whoever loads it
    (export's rule)."""
    source = tmp_path / "bots" / "bot.yaml"
    source.parent.mkdir()
    source.write_text(
        bot_yaml(
            settings="name: ${NAME}\ninstructions: 'Keep $${BOTCTL_API_KEY} out of answers'",
            attributes="- {name: tier, type: text, label: '${LABEL}'}",
        )
    )
    environ = {"NAME": "Bot ${BOTCTL_API_KEY}", "LABEL": "$${x}"}
    result = invoke("render", str(source.parent), env=environ)
    assert result.exit_code == 0, result.output
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(result.stdout)
    again = load_desired([rendered], environ={"BOTCTL_API_KEY": "leaked-key", "x": "leaked"})
    original = load_desired([source.parent], environ=environ)
    assert again.bots[0].settings == original.bots[0].settings
    assert again.bots[0].settings.name == "Bot ${BOTCTL_API_KEY}"
    assert again.bots[0].attributes == original.bots[0].attributes


# --- selection on plan, apply, drift ------------------------------------------------------


@pytest.fixture
def labelled(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    for name, labels in (
        ("support-eu", "{team: support, region: eu}"),
        ("support-us", "{team: support, region: us}"),
        ("sales-eu", "{team: sales, region: eu}"),
    ):
        bench.create_bot(f"id-{name}")
        text = bot_yaml(name, f"id-{name}", f"name: {name}").replace(
            f"  name: {name}\nspec:", f"  name: {name}\n  labels: {labels}\nspec:"
        )
        bench.write(f"{name}.yaml", text)
    return bench


def bots_in_plan(bench: Bench, *args: str) -> set[str]:
    result = bench.run("plan", "--format", "json", *args, str(bench.config_dir))
    assert result.exit_code == 0, result.output
    return {c["bot"] for c in json.loads(result.stdout)["changes"]}


def test_selection_on_plan_apply_and_drift(labelled: Bench) -> None:
    bench = labelled
    assert bots_in_plan(bench, "--target", "support-*") == {"support-eu", "support-us"}
    assert bots_in_plan(bench, "-l", "region=eu") == {"support-eu", "sales-eu"}
    assert bots_in_plan(bench, "-l", "team in (support),region!=us") == {"support-eu"}
    assert bots_in_plan(bench, "--exclude", "*-eu") == {"support-us"}
    assert bots_in_plan(bench, "--selector", "team=support", "--exclude", "support-us") == {
        "support-eu"
    }

    applied = bench.run("apply", "--auto-approve", "-l", "team=sales", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    assert {w["body"]["chatbotId"] for w in bench.writes()} == {"id-sales-eu"}
    assert bots_in_plan(bench) == {"support-eu", "support-us"}

    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.admin("PATCH", "/chatbots/id-support-eu", {"settings": {"name": "Edited"}})
    outside = bench.run("drift", "-l", "team=sales", str(bench.config_dir))
    assert outside.exit_code == 0, outside.output  # the edited chatbot is not selected
    caught = bench.run("drift", "--format", "json", "-l", "region=eu", str(bench.config_dir))
    assert caught.exit_code == 2, caught.output
    assert bots_named(json.loads(caught.stdout)) == {"support-eu"}
    refreshed = bench.run(
        "refresh", "--state", str(bench.state_path), "-l", "region=eu", str(bench.config_dir)
    )
    assert refreshed.exit_code == 0, refreshed.output
    assert refreshed.stdout.startswith("Refreshed 2 chatbot(s)")


def bots_named(value: Any) -> set[str]:
    """Every "bot" a JSON report names, at any depth."""
    if isinstance(value, dict):
        own = {value["bot"]} if isinstance(value.get("bot"), str) else set()
        return own.union(*(bots_named(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(bots_named(v) for v in value))
    return set()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--target", "suport-eu"), "--target 'suport-eu' matches no chatbot (did you mean"),
        (("-l", "team=suport"), "no chatbot has team=suport (did you mean 'team=support'?)"),
        (("-l", "team in support"), "Invalid value for '-l' / '--selector'"),
        (("--exclude", "legacy"), "--exclude 'legacy' matches no chatbot"),
    ],
)
def test_a_selection_that_matches_nothing_is_an_error(
    labelled: Bench, args: tuple[str, ...], fragment: str
) -> None:
    result = labelled.run("plan", *args, str(labelled.config_dir))
    assert result.exit_code == 1
    assert fragment in result.output
    assert labelled.requests() == []  # nothing was read either


def test_apply_of_a_saved_plan_takes_no_selection(labelled: Bench) -> None:
    out = labelled.workdir / "plan.json"
    assert labelled.run("plan", "--out", str(out), str(labelled.config_dir)).exit_code == 0
    result = labelled.run("apply", "--plan", str(out), "-l", "team=sales")
    assert result.exit_code == 1
    assert "apply --plan takes no PATH, --target, -l or --exclude" in result.output


# --- warnings: codes, silencing, --strict -------------------------------------------------


def test_validate_warning_codes_strict_and_disable(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "bot.yaml").write_text(bot_yaml(attributes="- {name: renewal-date, type: date}"))
    plain = invoke("validate", str(config))
    assert plain.exit_code == 0
    assert "bot.yaml:12:14: warning[BC101]: attribute name 'renewal-date'" in plain.stderr
    strict = invoke("validate", "--strict", str(config))
    assert strict.exit_code == 1
    assert "error[BC101]" in strict.stderr
    assert "1 error(s) in the configuration" in strict.stderr
    for flag in ("BC101", "attribute-name-style", "BC202,BC101"):
        silenced = invoke("validate", "--strict", "--disable-warning", flag, str(config))
        assert silenced.exit_code == 0, silenced.output
        assert "warning" not in silenced.output
    typo = invoke("validate", "--disable-warning", "BC1O1", str(config))
    assert typo.exit_code == 1
    assert "'BC1O1' is not a warning code (did you mean 'BC101'?)" in typo.output


# --- the project file -------------------------------------------------------------------------


@pytest.fixture
def project(sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot("bot-1")
    bench.write("bots/support.yaml", bot_yaml(attributes="- {name: renewal-date, type: date}"))
    (tmp_path / "config" / "botctl.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Project\npaths: [bots]\n"
        f"apiUrl: {sandbox.api_url}\nstate: state/botctl.json\nparallelism: 2\n"
        "lint: {disable: [attribute-name-style]}\n"
    )
    (tmp_path / "config" / "bots" / "deeper").mkdir()
    monkeypatch.chdir(tmp_path / "config" / "bots" / "deeper")  # found by walking up
    return bench


def botctl(*args: str, env: dict[str, str] | None = None) -> Result:
    """botctl with only the API key in the environment: the rest comes from botctl.yaml."""
    return invoke(*args, env={"BOTCTL_API_KEY": KEY, **(env or {})})


def test_a_project_file_replaces_the_flags_of_every_step(project: Bench) -> None:
    state = project.workdir / "config" / "state" / "botctl.json"
    plan = botctl("plan")
    assert plan.exit_code == 0, plan.output
    assert "support" in plan.stdout
    assert "warning" not in plan.output  # BC101 silenced by the project file
    applied = botctl("apply", "--auto-approve")
    assert applied.exit_code == 0, applied.output
    assert state.is_file()  # relative to botctl.yaml, not to the working directory
    assert botctl("drift").exit_code == 0
    assert "is not locked" in botctl("unlock").stdout
    assert str(Path("..") / ".." / "state" / "botctl.json") in botctl("unlock").stdout


def test_flags_and_environment_override_the_project_file(project: Bench, tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9/api/v1"
    by_env = botctl("plan", env={"BOTCTL_API_URL": dead})
    assert by_env.exit_code == 1
    assert "could not reach 127.0.0.1" in by_env.stderr
    by_flag = botctl("plan", "--api-url", project.api_url, env={"BOTCTL_API_URL": dead})
    assert by_flag.exit_code == 0, by_flag.output
    other_state = tmp_path / "elsewhere.json"
    assert botctl("apply", "--auto-approve", "--state", str(other_state)).exit_code == 0
    assert other_state.is_file()
    assert not (project.workdir / "config" / "state" / "botctl.json").exists()
    # PATHs given on the command line replace the project's paths.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.yaml").write_text(bot_yaml("x", "bot-x"))
    named = botctl("validate", str(tmp_path / "other"))
    assert named.exit_code == 0
    assert "1 chatbot(s)" in named.stdout


def test_explicit_config_and_a_broken_project_file(project: Bench, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: botctl/v1\nkind: Project\nparalelism: 2\n")
    result = botctl("validate", "--config", str(broken))
    assert result.exit_code == 1
    assert f"{broken}:3:1: unknown key 'paralelism' (did you mean 'parallelism'?)" in result.stderr
    by_env = botctl("validate", env={"BOTCTL_CONFIG": str(broken)})
    assert by_env.exit_code == 1
    missing = botctl("validate", "--config", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 1
    assert "no such file" in missing.stderr


def test_the_project_file_is_never_a_document(project: Bench) -> None:
    config = project.workdir / "config"
    assert botctl("validate", str(config)).exit_code == 0  # the directory walk skips it
    result = botctl("validate", str(config / "botctl.yaml"))
    assert result.exit_code == 1
    assert "a project file, not a configuration document" in result.stderr


def test_allow_unknown_models_from_the_project_and_its_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bot.yaml").write_text(bot_yaml(settings="model: gpt-9-preview"))
    (tmp_path / "botctl.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Project\npaths: [.]\nallowUnknownModels: true\n"
    )
    monkeypatch.chdir(tmp_path)
    allowed = invoke("validate")
    assert allowed.exit_code == 0, allowed.output
    assert "warning[BC102]" in allowed.stderr
    refused = invoke("validate", "--no-allow-unknown-models")
    assert refused.exit_code == 1
    assert "--allow-unknown-models" in refused.stderr


def test_the_plans_own_warnings_are_coded_and_silenced_by_run_or_project(
    labelled: Bench,
) -> None:
    bench = labelled
    bench.write("styled.yaml", bot_yaml("styled", "id-styled", "styles: {theme: dark}"))
    bench.create_bot("id-styled")
    shown = bench.run("plan", "--format", "json", "--target", "styled", str(bench.config_dir))
    assert shown.exit_code == 0, shown.output
    [warning] = json.loads(shown.stdout)["warnings"]
    assert warning.startswith("warning[BC302]: styled: styles is sent whole")
    text = bench.run("plan", "--target", "styled", str(bench.config_dir))
    assert "\nwarning[BC302]: styled: styles is sent whole" in text.stdout  # said once
    for flag in ("BC302", "sent-whole"):
        quiet = bench.run(
            "plan", "--format", "json", "--disable-warning", flag, str(bench.config_dir)
        )
        assert json.loads(quiet.stdout)["warnings"] == []
    (bench.config_dir / "botctl.yaml").write_text(
        "apiVersion: botctl/v1\nkind: Project\nlint: {disable: [BC302]}\n"
    )
    by_project = bench.run(
        "drift",
        "--format",
        "json",
        "--config",
        str(bench.config_dir / "botctl.yaml"),
        str(bench.config_dir),
    )
    assert json.loads(by_project.stdout)["warnings"] == []
    drift = bench.run("drift", "--format", "json", str(bench.config_dir))
    assert any("[BC302]" in w for w in json.loads(drift.stdout)["warnings"])
