"""The command line itself: help, usage errors, exit codes, demo, schema, export, unlock."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from botctl.cli import cli
from botctl.config.document import json_schema
from botctl.config.project import project_json_schema
from tests.e2e_support import KEY, Bench, bot_yaml


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env={"NO_COLOR": "1", **(env or {})})


@pytest.mark.parametrize(
    "command",
    [
        "validate",
        "plan",
        "apply",
        "drift",
        "render",
        "export",
        "schema",
        "demo",
        "unlock",
        "test",
        "promote",
    ],
)
def test_every_command_has_help(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output
    assert len(result.output.splitlines()) > 4


def test_sandbox_serve_is_registered() -> None:
    result = invoke("sandbox", "serve", "--help")
    assert result.exit_code == 0
    assert "--api-key" in result.output


def test_usage_errors_exit_1_not_2() -> None:
    # 2 means "changes present": a typo on the command line must never look like that.
    for args in (["plan", "--format", "yaml", "x"], ["nonsense"], ["plan"]):
        result = invoke(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "Traceback" not in result.output


def test_no_api_url_is_explained(tmp_path: Path) -> None:
    (tmp_path / "bot.yaml").write_text(bot_yaml())
    result = invoke("plan", str(tmp_path), env={"BOTCTL_API_KEY": "k"})
    assert result.exit_code == 1
    assert "--api-url" in result.output


def test_validate_reports_all_problems_located(tmp_path: Path) -> None:
    (tmp_path / "bot.yaml").write_text(bot_yaml(settings="temp: 3\nvisibility: hidden\nmodle: x"))
    result = invoke("validate", str(tmp_path))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if "bot.yaml:" in line]
    assert len(lines) == 3
    assert "3 error(s)" in result.output


def test_schema_command_prints_the_checked_in_schema() -> None:
    result = invoke("schema")
    assert result.exit_code == 0
    assert json.loads(result.output) == json_schema()
    project = invoke("schema", "--project")
    assert project.exit_code == 0
    assert json.loads(project.output) == project_json_schema()


def test_demo_runs_offline_adopts_and_shows_drift() -> None:
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    # Adopted with export, drift on it starts clean...
    assert "$ botctl export faq-bot --out" in result.output
    assert "No drift: 0 changed outside botctl" in result.output
    assert "No changes. The service matches the configuration." in result.output
    # The examples' conversation tests pass against the applied chatbots...
    tests = result.output.split("7. $ botctl test", 1)[1].split("8. Someone", 1)[0]
    assert "PASS  support-password-reset  support (demo-support-01)" in tests
    assert "PASS  sales-offers-a-demo  sales (demo-sales-01)  3/3 runs passed" in tests
    assert "Tests: 4 passed, 0 failed, 0 error(s) (4 in all)." in tests
    # ... and a dashboard edit of it is caught in its class, beside the applied examples'.
    drift = result.output.split("9. $ botctl drift", 1)[1].split("10. $", 1)[0]
    assert "Drift detected: 3 changed outside botctl" in drift
    assert 'faq:\n  ! settings model: recorded "gpt-4o-mini" (verified), now "gpt-5-mini"' in drift
    # Tests drawn from the stored conversations, personal data redacted...
    pulled = result.output.split("10. $ botctl conversations pull", 1)[1].split("11. ", 1)[0]
    assert "3 conversations read, 2 tests written, skipped: 1 near-duplicate questions" in pulled
    assert "Hi, I'm [name], you can call me on [phone]." in pulled
    assert "Maria" not in pulled
    assert "4242" not in pulled
    # ... and the pull request's behaviour diff: the refund answers changed, the rest did not.
    diff = result.output.split("12. $ botctl test", 1)[1]
    assert "Behaviour against tier=production: 2 of 5 answer(s) changed" in diff
    assert 'baseline  PASS    "I cannot issue refunds myself' in diff
    assert 'now       FAIL    "Sandbox answer (gpt-5-mini): Refunds are quick' in diff
    assert "Tests: 2 passed, 2 failed, 0 error(s) (4 in all)." in diff


def test_unlock_when_not_locked(tmp_path: Path) -> None:
    result = invoke("unlock", "--state", str(tmp_path / "state.json"))
    assert result.exit_code == 0
    assert "not locked" in result.output


def test_export_round_trips_through_plan(sandbox: Any, tmp_path: Path) -> None:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot(
        "bot-x",
        settings={"name": "Existing", "model": "gpt-4o-mini", "instructions": "Line 1\nLine 2\n"},
        attributes=[
            {"name": "tier", "type": "text", "label": "Tier"},
            {"name": "old", "type": "number", "label": "Old", "archived": True},
        ],
    )
    out = tmp_path / "exported"
    result = bench.run("export", "--all", "--out", str(out))
    assert result.exit_code == 0, result.output
    (path,) = out.glob("*.yaml")
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert "Not readable from the service" in text
    doc = yaml.safe_load(text)
    assert doc["spec"]["chatbotId"] == "bot-x"
    assert doc["spec"]["settings"]["instructions"] == "Line 1\nLine 2\n"
    # Adopting the export: the plan is empty, nothing would be written.
    plan = bench.plan_json(str(out))
    assert plan["changes"] == []
    again = bench.run("export", "--all", "--out", str(out))
    assert again.exit_code == 1
    assert "not overwritten" in again.output


def test_export_unknown_chatbot(sandbox: Any, tmp_path: Path) -> None:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    result = bench.run("export", "nope")
    assert result.exit_code == 1
    assert "no such chatbot" in result.output
    assert KEY not in result.output


def test_sandbox_flag_targets_the_embedded_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # --sandbox keeps its database in ./.botctl
    Path("bots").mkdir()
    Path("bots/bot.yaml").write_text(bot_yaml(attributes="- {name: tier, type: text}"))
    env = {"BOTCTL_API_URL": ""}
    first = invoke("apply", "--sandbox", "--auto-approve", "bots", env=env)
    assert first.exit_code == 0, first.output
    assert Path(".botctl/sandbox.db").exists()
    assert Path(".botctl/state.json").exists()
    again = invoke("plan", "--sandbox", "--detailed-exitcode", "bots", env=env)
    assert again.exit_code == 0, again.output
    assert "No changes" in again.output


def test_sandbox_accepts_the_configurations_unknown_models_when_botctl_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--sandbox agrees with --allow-unknown-models: a model released after this botctl is
    accepted by the embedded sandbox too, and refused by both without the flag."""
    monkeypatch.chdir(tmp_path)
    Path("bots").mkdir()
    Path("bots/bot.yaml").write_text(bot_yaml(settings="name: Bot\nmodel: gpt-9-turbo"))
    env = {"BOTCTL_API_URL": ""}
    refused = invoke("apply", "--sandbox", "--auto-approve", "bots", env=env)
    assert refused.exit_code == 1
    assert "--allow-unknown-models" in refused.output
    flag = "--allow-unknown-models"
    applied = invoke("apply", "--sandbox", "--auto-approve", flag, "bots", env=env)
    assert applied.exit_code == 0, applied.output
    assert "Apply complete: 1 applied, 0 failed" in applied.output
    again = invoke("plan", "--sandbox", "--detailed-exitcode", flag, "bots", env=env)
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("notaurl", "must be an http:// or https:// URL"),
        ("ftp://host/api/v1", "must be an http:// or https:// URL"),
        ("https://host", "ending in /api/v1 (e.g. https://host/api/v1)"),
        ("https://u:pw@host", "ending in /api/v1 (e.g. https://host/api/v1), got 'https://host'"),
        # Two URLs pasted into one variable: was a traceback from the HTTP library.
        (
            "http://127.0.0.1:9\nhttp://127.0.0.1:9/api/v1",
            "must be one URL, without spaces or control characters",
        ),
        ("http://host/a b/api/v1", "must be one URL, without spaces or control characters"),
        ("http://[::1/api/v1", "must be an http:// or https:// URL"),
    ],
)
def test_api_url_is_checked_before_any_request(tmp_path: Path, url: str, message: str) -> None:
    (tmp_path / "bot.yaml").write_text(bot_yaml())
    for command in ("plan", "drift", "export"):
        args = ["--all"] if command == "export" else [str(tmp_path)]
        result = invoke(command, *args, "--api-url", url, env={"BOTCTL_API_KEY": "k"})
        assert result.exit_code == 1, (command, result.output)
        assert message in result.output, (command, result.output)
        assert "Traceback" not in result.output
        assert "pw" not in result.output


def test_run_async_never_formats_the_result() -> None:
    """asyncio.run formats its finished main task (result included) when it restores the
    SIGINT handler (CPython 3.11); a whole plan's repr is expensive, so run_async keeps it
    out of the task."""
    from botctl.cli.console import run_async

    class Counted:
        calls = 0

        def __repr__(self) -> str:
            Counted.calls += 1
            return "Counted()"

    async def make() -> Counted:
        return Counted()

    result = run_async(make())
    assert isinstance(result, Counted)
    assert Counted.calls == 0


# --- where a run's settings come from: flag or environment, botctl.yaml, botctl's default ----

PROJECT_TEXT = (
    "apiVersion: botctl/v1\nkind: Project\napiUrl: http://project.test/api/v1\n"
    "state: s/state.json\nparallelism: 3\nrateLimit: 7\nallowUnknownModels: true\n"
    "maxArchives: 9\nstateEncryption: passphrase\n"
)


PROJECT_OPTIONS_ENV = (
    "BOTCTL_API_URL",
    "BOTCTL_STATE",
    "BOTCTL_CONFIG",
    "BOTCTL_ALLOW_UNKNOWN_MODELS",
    "BOTCTL_MAX_ARCHIVES",
    "BOTCTL_STATE_ENCRYPTION",
)


def settled(argv: list[str], where: Path) -> dict[str, Any]:
    """The options `botctl plan ARGV` runs with from ``where``: parsed by click, the project
    file (if ``where`` has one above it) as its default_map, built into ``PlanOptions``."""
    from botctl.cli.options import build
    from botctl.cli.plan import PlanOptions, plan

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)
        for name in PROJECT_OPTIONS_ENV:
            patch.delenv(name, raising=False)
        ctx = plan.make_context("plan", argv)
    build(PlanOptions, ctx.params)  # every option has its field
    return ctx.params


@pytest.mark.parametrize(
    ("param", "flag", "given", "from_project", "default"),
    [
        ("api_url", "--api-url=http://flag.test/api/v1", "http://flag.test/api/v1",
         "http://project.test/api/v1", None),
        ("parallelism", "--parallelism=5", 5, 3, 8),
        ("rate_limit", "--rate-limit=2.5", 2.5, 7, 0.0),
        ("allow_unknown_models", "--no-allow-unknown-models", False, True, False),
        ("max_archives", "--max-archives=0", 0, 9, 50),
        ("state_encryption", "--state-encryption=none", "none", "passphrase", None),
    ],
)  # fmt: skip
def test_given_beats_the_project_file_which_beats_the_default(
    tmp_path: Path, param: str, flag: str, given: Any, from_project: Any, default: Any
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "botctl.yaml").write_text(PROJECT_TEXT)
    (tmp_path / "none").mkdir()
    project = tmp_path / "project"
    assert settled([flag], project)[param] == given  # even a falsy value given wins
    assert settled([], project)[param] == from_project
    assert settled([], tmp_path / "none")[param] == default


def test_the_project_state_is_relative_to_the_project_file(tmp_path: Path) -> None:
    (tmp_path / "botctl.yaml").write_text(PROJECT_TEXT)
    (tmp_path / "deep").mkdir()
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "botctl.yaml").write_text("apiVersion: botctl/v1\nkind: Project\n")
    deep = tmp_path / "deep"
    assert Path(settled([], deep)["state_path"]) == Path("../s/state.json")
    assert Path(settled(["--state", "x.json"], deep)["state_path"]) == Path("x.json")
    assert Path(settled([], tmp_path / "none")["state_path"]) == Path(".botctl/state.json")


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in sorted(group.commands.items()):
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
    return found


@pytest.mark.parametrize(("name", "command"), _commands(cli))
def test_every_command_takes_exactly_its_options(name: str, command: click.Command) -> None:
    """Each option reaches the command as a typed field of the same name: a command taking
    ``**params`` (looked up by string) or an options class that misses one cannot pass."""
    from botctl.cli.options import option_names, options_type

    if command.callback is None:
        return
    given = sorted(p.name for p in command.params if p.expose_value and p.name)
    cls = options_type(command)
    if cls is not None:
        assert sorted(option_names(cls)) == given
        return
    signature = inspect.signature(command.callback)
    kinds = {p.kind for p in signature.parameters.values()}
    forwarded = getattr(command.callback, "forwards_to", None)
    if forwarded is not None:  # another command's options, handed on through build()
        own = set(signature.parameters) - {"ctx", "params"}
        assert set(given) - own <= set(option_names(forwarded)), name
        return
    assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{name} takes **params"
    assert sorted(set(signature.parameters) - {"ctx"}) == given  # ctx: click.pass_context


def test_a_renamed_option_is_an_error_not_false() -> None:
    """The failure this guards against: an option renamed (here --no-reads to --no-read) while
    the code still asks for the old name, which used to read as False."""
    from botctl.cli.options import build, takes

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Options:
        no_reads: bool

    seen: list[Options] = []

    @click.command()
    @click.option("--no-read", "no_read", is_flag=True)
    @takes(Options)
    def command(o: Options) -> int:
        seen.append(o)
        return 0

    with pytest.raises(TypeError, match=r"no option gives Options\.no_reads"):
        command.main(["--no-read"], standalone_mode=False)
    assert seen == []
    with pytest.raises(TypeError, match="no field for the option"):
        build(Options, {"no_reads": True, "no_read": True})
    assert build(Options, {"no_reads": True}) == Options(no_reads=True)


def test_every_project_field_is_one_option_of_plan() -> None:
    """botctl.yaml's settings each reach click as the default of one option (its
    ``project_field``), and each such option names a field the file has."""
    from botctl.cli.options import ProjectOption
    from botctl.cli.plan import plan
    from botctl.config.project import ProjectFile

    claimed = [p.project_field for p in plan.params if isinstance(p, ProjectOption)]
    own = {"apiVersion", "kind", "paths", "lint", "redact"}  # read by the command itself
    assert sorted(claimed) == sorted(set(ProjectFile.model_fields) - own)
    for _, command in _commands(cli):
        for p in command.params:
            if isinstance(p, ProjectOption):
                assert p.project_field in ProjectFile.model_fields, (command.name, p.name)


def test_the_retry_backoff_base_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BOTCTL_RETRY_BASE_DELAY (what test suites set) reaches the retry policy; a value that
    is no number of seconds is a usage error naming the variable."""
    from botctl.cli.options import build, service
    from botctl.cli.plan import PlanOptions, plan
    from botctl.defaults import DEFAULT_RETRY_BASE_DELAY, RETRY_BASE_DELAY_ENV

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(RETRY_BASE_DELAY_ENV)
    default = build(PlanOptions, plan.make_context("plan", []).params)
    assert service(default.service).retry_base_delay == DEFAULT_RETRY_BASE_DELAY
    monkeypatch.setenv(RETRY_BASE_DELAY_ENV, "0.25")
    given = build(PlanOptions, plan.make_context("plan", []).params)
    assert service(given.service).retry_base_delay == 0.25
    for bad in ("soon", "-1", "nan", "inf"):
        result = invoke("plan", "bot.yaml", env={RETRY_BASE_DELAY_ENV: bad})
        assert result.exit_code == 1, bad
        assert f"{RETRY_BASE_DELAY_ENV}={bad!r}: give a number of seconds >= 0" in result.output
        assert "Traceback" not in result.output
