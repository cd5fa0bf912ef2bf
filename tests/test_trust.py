"""#23: what a repository's files may reach is the operator's to say (README, "Trust"): the
variables they read (``BOTCTL_ALLOW_ENV``), the URL a key goes to in CI, the paths they
name. The rules on their own, and through the CLI as a person at a terminal and as CI run
it."""

from __future__ import annotations

from pathlib import Path

import pytest

from botctl.config.interpolate import InterpolationError, Interpolator
from botctl.config.loader import load_fleet
from botctl.errors import ConfigError
from botctl.trust import ExposedEnviron, Exposure, ci_detected
from tests.e2e_support import Bench, bot_yaml


@pytest.mark.parametrize(
    ("name", "use", "exposed"),
    [
        ("COMPANY_NAME", "text", True),  # README's example
        ("PROMPT_TOKEN", "secret", True),  # README's ${secret:} example
        ("SUPPORT_BOT_KEY", "key", True),  # README's apiKeyEnv example
        ("SALES_BOT_KEY", "key", True),  # examples/sales.yaml
        ("BOTCTL_API_KEY", "key", True),  # the default key variable
        ("PROMPT_TOKEN", "text", False),  # a credential's name, in clear: as a secret only
        ("DB_PASSWORD", "text", False),
        ("AWS_SECRET_ACCESS_KEY", "text", False),
        ("AWS_SECRET_ACCESS_KEY", "secret", False),
        ("AWS_SECRET_ACCESS_KEY", "key", False),
        ("GITHUB_TOKEN", "secret", False),
        ("CI_JOB_TOKEN", "secret", False),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "secret", False),
        ("BOTCTL_API_KEY", "text", False),
        ("BOTCTL_STATE_KEY", "key", False),
        ("BOTCTL_OLD_STATE_KEY", "secret", False),
        ("BOTCTL_GIT_TOKEN", "secret", False),
    ],
)
def test_the_default_exposure_keeps_documented_setups_and_no_credential(
    name: str, use: str, exposed: bool
) -> None:
    assert (Exposure.of({}).refusal(name, use) is None) is exposed  # type: ignore[arg-type]


def test_an_operator_list_replaces_the_default_and_never_opens_botctls_secrets() -> None:
    exposure = Exposure.of({"BOTCTL_ALLOW_ENV": "COMPANY_NAME, SUPPORT_*  DB_PASSWORD *_STATE_KEY"})
    assert exposure.refusal("COMPANY_NAME", "text") is None
    assert exposure.refusal("SUPPORT_BOT_KEY", "key") is None
    assert exposure.refusal("DB_PASSWORD", "text") is None  # the operator's decision
    assert exposure.refusal("BOTCTL_API_KEY", "key") is None  # the default key: always
    refused = exposure.refusal("SALES_BOT_KEY", "key")
    assert refused is not None
    assert "not in BOTCTL_ALLOW_ENV" in refused
    own = exposure.refusal("BOTCTL_STATE_KEY", "secret")
    assert own is not None
    assert "one of botctl's own secrets" in own
    widened = Exposure.of({"BOTCTL_ALLOW_ENV": "default,PROMPT_TOKEN"})
    assert widened.refusal("PROMPT_TOKEN", "text") is None
    assert widened.refusal("COMPANY_NAME", "text") is None
    assert widened.refusal("GITHUB_TOKEN", "text") is not None
    agent = Exposure.of({"BOTCTL_ALLOW_ENV": "*"}, never={"HOOK_SECRET"})
    assert agent.refusal("HOOK_SECRET", "secret") is not None  # the webhook's secret
    assert agent.refusal("ANYTHING", "text") is None


def test_a_refused_variable_is_a_located_error_naming_it_and_how_to_allow_it(
    tmp_path: Path,
) -> None:
    bots = tmp_path / "bots"
    bots.mkdir()
    (bots / "support.yaml").write_text(
        bot_yaml(
            settings="name: Bot\ninstructions: 'key ${AWS_SECRET_ACCESS_KEY:-none}'",
            extra="apiKeyEnv: BOTCTL_STATE_KEY",
        )
    )
    environ = {"AWS_SECRET_ACCESS_KEY": "aws-secret-value-123", "BOTCTL_STATE_KEY": "k" * 20}
    with pytest.raises(ConfigError) as refused:
        load_fleet([bots], environ=environ)
    text = str(refused.value)
    assert f"{bots}/support.yaml:7:14: apiKeyEnv" in text  # where it is written
    assert "apiKeyEnv BOTCTL_STATE_KEY: BOTCTL_STATE_KEY is one of botctl's own secrets" in text
    assert "${AWS_SECRET_ACCESS_KEY}: AWS_SECRET_ACCESS_KEY is not exposed" in text
    assert "BOTCTL_ALLOW_ENV=default,AWS_SECRET_ACCESS_KEY" in text
    assert "aws-secret-value-123" not in text
    assert "k" * 20 not in text


def test_the_environment_a_run_carries_decides_over_the_one_it_names() -> None:
    environ = ExposedEnviron({"TEAM": "blue", "BOTCTL_ALLOW_ENV": "*"}, Exposure(("OTHER",)))
    with pytest.raises(InterpolationError, match="TEAM is not in BOTCTL_ALLOW_ENV"):
        Interpolator(environ)("${TEAM}")
    assert Interpolator(ExposedEnviron({"TEAM": "blue"}, Exposure(("TEAM",))))("${TEAM}") == "blue"


@pytest.mark.parametrize(
    ("environ", "found"),
    [
        ({}, None),
        ({"CI": "false"}, None),
        ({"CI": "0"}, None),
        ({"CI": "true"}, "CI=true"),
        ({"CI": "1"}, "CI=1"),
        ({"GITHUB_ACTIONS": "true"}, "GITHUB_ACTIONS=true"),
        ({"GITLAB_CI": "true"}, "GITLAB_CI=true"),
        ({"JENKINS_URL": "https://jenkins.example/"}, "JENKINS_URL"),
    ],
)
def test_ci_is_known_by_its_variables(environ: dict[str, str], found: str | None) -> None:
    assert ci_detected(environ) == found


# --- through the CLI: a person at a terminal, and CI ------------------------------------


@pytest.fixture
def bench(sandbox: object, tmp_path: Path) -> Bench:
    found = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)  # type: ignore[attr-defined]
    found.create_bot("bot-1")
    (tmp_path / ".git").mkdir()  # the repository's top
    found.write("support.yaml", bot_yaml())
    return found


def project(bench: Bench, extra: str) -> None:
    (bench.workdir / "botctl.yaml").write_text(
        f"apiVersion: botctl/v1\nkind: Project\npaths: [config]\n{extra}"
    )


def plan(bench: Bench, env: dict[str, str], *args: str) -> tuple[int, str]:
    import os

    from click.testing import CliRunner

    from botctl.cli import cli

    cwd = os.getcwd()
    os.chdir(bench.workdir)
    try:
        result = CliRunner().invoke(
            cli,
            ["plan", *args],
            env={"BOTCTL_API_KEY": "test-key", **env},
            catch_exceptions=False,
        )
    finally:
        os.chdir(cwd)
    return result.exit_code, result.output


def test_at_a_terminal_botctl_yaml_names_the_api_url(bench: Bench) -> None:
    project(bench, f"apiUrl: {bench.api_url}\n")
    code, output = plan(bench, {"BOTCTL_API_URL": ""})
    assert code == 0, output


def test_in_ci_the_api_url_is_the_operators_and_botctl_yaml_may_only_repeat_it(
    bench: Bench,
) -> None:
    project(bench, f"apiUrl: {bench.api_url}\n")
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": ""})
    assert code == 1
    assert "botctl.yaml:4:9: apiUrl" in output
    assert "named only by the repository's botctl.yaml; in CI (CI=true)" in output
    assert "set BOTCTL_API_URL in the job's settings (or pass --api-url" in output
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": bench.api_url})
    assert code == 0, output  # repeated: fine
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": bench.api_url + "/"})
    assert code == 0, output
    other = bench.api_url.replace("127.0.0.1", "localhost")
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": other})
    assert code == 1
    assert "differs from the operator's" in output


def test_in_ci_a_state_path_botctl_yaml_names_stays_inside_the_repository(bench: Bench) -> None:
    project(bench, "state: .botctl/state.json\n")
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": bench.api_url})
    assert code == 0, output
    project(bench, "state: ../elsewhere/state.json\n")
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": bench.api_url})
    assert code == 1
    assert "'../elsewhere/state.json' leaves the repository" in output
    project(bench, "state: s3://bucket/state.json\n")
    code, output = plan(bench, {"GITLAB_CI": "true", "BOTCTL_API_URL": bench.api_url})
    assert code == 1
    assert "state 's3://bucket/state.json' is named only by the repository's botctl.yaml" in output


def test_in_ci_a_project_file_the_operator_gives_from_outside_the_checkout_is_the_operators(
    bench: Bench, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("operator") / "botctl.yaml"
    outside.write_text(
        f"apiVersion: botctl/v1\nkind: Project\npaths: [{bench.config_dir}]\n"
        f"apiUrl: {bench.api_url}\n"
    )
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": ""}, "--config", str(outside))
    assert code == 0, output
    inside = bench.workdir / "ops.yaml"  # inside the checkout: the repository's, refused
    inside.write_text(outside.read_text())
    code, output = plan(bench, {"CI": "true", "BOTCTL_API_URL": ""}, "--config", str(inside))
    assert code == 1
    assert "is named only by the repository's botctl.yaml" in output
