"""A configuration repository as botctl makes it: `botctl init` (idempotent, merging into what
is there, never clobbering), `export --out` seeing to the same .gitignore line and a schema
its documents' first lines resolve to, and the warning when a state key file lands where
`git add -A` would commit it. The real CLI, the sandbox over loopback HTTP, real git."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from botctl.cli import cli
from botctl.config.document import json_schema
from botctl.config.project import load_project, project_json_schema
from tests.e2e_support import KEY, Bench, bot_yaml

ROOT = Path(__file__).parents[1]
SCHEMA_HINT = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")
SECRET_SETTINGS = "name: Support\ninstructions: 'Use token ${secret:PROMPT_TOKEN} carefully'"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """git as a fresh install has it: no user's global ignore file or configuration."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path))


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def new_repository(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet")
    return path


def botctl(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={"NO_COLOR": "1", **(env or {})})


def staged(repo: Path) -> list[str]:
    """What `git add -A` puts into the next commit."""
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--name-only").split()


def schema_of(document: Path) -> Path:
    """The file a document's first line points editors at, resolved from its own directory."""
    first = document.read_text(encoding="utf-8").splitlines()[0]
    match = SCHEMA_HINT.match(first)
    assert match is not None, first
    return (document.parent / match.group(1)).resolve()


# --- botctl init ---------------------------------------------------------------------------------


def test_init_scaffolds_a_repository_whose_files_work(tmp_path: Path) -> None:
    repo = tmp_path / "my-bots"
    result = botctl("init", str(repo))
    assert result.exit_code == 0, result.output
    for line in (
        f"wrote {repo}/botctl.yaml (the project file)",
        f"wrote {repo}/bots/ (the documents go here)",
        f"wrote {repo}/.gitignore (.botctl/: the state's key file is never committed)",
        f"wrote {repo}/schemas/botctl.schema.json (editors check the documents)",
        f"wrote {repo}/schemas/botctl-project.schema.json (editors check botctl.yaml)",
    ):
        assert line in result.stdout
    assert f"Next: cd {repo}; set BOTCTL_API_URL" in result.stderr
    assert (repo / "bots").is_dir()
    assert ".botctl/" in (repo / ".gitignore").read_text().splitlines()
    # The project file loads, with its paths and state relative to it, and its own first
    # line names the project schema, which is this botctl's.
    project = load_project(repo / "botctl.yaml", {})
    assert project.settings.paths == ("bots",)
    assert project.settings.state == ".botctl/state.json"
    assert schema_of(repo / "botctl.yaml") == (repo / "schemas/botctl-project.schema.json")
    on_disk = json.loads((repo / "schemas/botctl-project.schema.json").read_text())
    assert on_disk == project_json_schema()
    assert json.loads((repo / "schemas/botctl.schema.json").read_text()) == json_schema()
    # Byte for byte what `botctl schema` prints, so `botctl schema > ...` changes nothing.
    assert (repo / "schemas/botctl.schema.json").read_text() == botctl("schema").stdout


def test_init_is_idempotent_and_says_what_it_left_alone(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert botctl("init", str(repo), "--ci", "gitlab").exit_code == 0
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    again = botctl("init", str(repo), "--ci", "gitlab")
    assert again.exit_code == 0, again.output
    assert "wrote" not in again.stdout
    assert "added" not in again.stdout
    assert f"left alone {repo}/.gitignore (already keeps .botctl/ out of git)" in again.stdout
    assert f"left alone {repo}/botctl.yaml (exists)" in again.stdout
    assert "Next:" not in again.stderr
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def test_init_merges_into_an_existing_gitignore_and_never_clobbers(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("node_modules/\n*.log", encoding="utf-8")  # no final \n
    (repo / "botctl.yaml").write_text("apiVersion: botctl/v1\nkind: Project\n")
    stale = '{"old": true}\n'
    (repo / "schemas").mkdir()
    (repo / "schemas/botctl.schema.json").write_text(stale)
    result = botctl("init", str(repo))
    assert result.exit_code == 0, result.output
    assert f"added to {repo}/.gitignore" in result.stdout
    assert (repo / ".gitignore").read_text().splitlines() == [
        "node_modules/",
        "*.log",
        "# botctl's local files: the state, its key file, the sandbox's database",
        ".botctl/",
    ]
    assert (repo / "botctl.yaml").read_text() == "apiVersion: botctl/v1\nkind: Project\n"
    assert f"left alone {repo}/botctl.yaml (exists)" in result.stdout
    assert (repo / "schemas/botctl.schema.json").read_text() == stale
    assert (
        f"left alone {repo}/schemas/botctl.schema.json (not this botctl's; `botctl schema > "
        "schemas/botctl.schema.json` updates it)" in result.stdout
    )
    # A botctl.yml is the project file too: no botctl.yaml beside it.
    (repo / "botctl.yaml").rename(repo / "botctl.yml")
    assert f"left alone {repo}/botctl.yml (exists)" in botctl("init", str(repo)).stdout
    assert not (repo / "botctl.yaml").exists()
    # A line written another way that means the same is not added again.
    (repo / ".gitignore").write_text("/.botctl\n")
    assert "left alone" in botctl("init", str(repo)).stdout
    assert (repo / ".gitignore").read_text() == "/.botctl\n"


def test_init_writes_through_a_symlinked_gitignore(tmp_path: Path) -> None:
    shared = tmp_path / "shared.gitignore"
    shared.write_text("dist/\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").symlink_to(shared)
    assert botctl("init", str(repo)).exit_code == 0
    assert (repo / ".gitignore").is_symlink()
    assert shared.read_text().splitlines()[-1] == ".botctl/"


@pytest.mark.parametrize(
    ("ci", "template", "destination"),
    [
        ("github", "github-workflow.yml", ".github/workflows/botctl.yml"),
        ("gitlab", "gitlab-ci.yml", ".gitlab-ci.yml"),
    ],
)
def test_init_ci_copies_the_documented_workflow(
    tmp_path: Path, ci: str, template: str, destination: str
) -> None:
    result = botctl("init", str(tmp_path), "--ci", ci)
    assert result.exit_code == 0, result.output
    written = tmp_path / destination
    assert written.read_bytes() == (ROOT / "docs/ci" / template).read_bytes()
    assert f"wrote {written} (the {ci} workflow: adjust its marked lines)" in result.stdout
    written.write_text("# ours\n")
    assert botctl("init", str(tmp_path), "--ci", ci).exit_code == 0
    assert written.read_text() == "# ours\n"


def test_init_refuses_what_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = botctl("init", str(tmp_path / "file"))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    bad_ci = botctl("init", str(tmp_path), "--ci", "jenkins")
    assert bad_ci.exit_code == 1
    assert "'jenkins' is not one of 'github', 'gitlab'" in bad_ci.output


def test_init_help_teaches() -> None:
    result = botctl("init", "--help")
    assert result.exit_code == 0
    for taught in (
        "leaves alone what is there",
        ".gitignore",
        ".botctl/",
        "schemas/botctl.schema.json",
        "--ci [github|gitlab]",
        "botctl export --all --out bots/",
    ):
        assert taught in result.output, taught


# --- the whole path: init, export, a secret, git add -A ------------------------------------------


def test_a_repository_made_by_init_never_commits_the_state_key(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repository(tmp_path / "repo")
    monkeypatch.chdir(repo)
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=repo)
    bench.create_bot("bot-1", settings={"name": "Old"})
    assert botctl("init").exit_code == 0
    exported = bench.run("export", "--all", "--out", "bots")
    assert exported.exit_code == 0, exported.output
    assert "left alone .gitignore (already keeps .botctl/ out of git)" in exported.stdout
    [document] = (repo / "bots").glob("*.yaml")
    assert schema_of(document) == repo / "schemas/botctl.schema.json"
    # A secret in the configuration: the first apply makes the local state's key file.
    secret = "name: Support\n    instructions: 'Use token ${secret:PROMPT_TOKEN} carefully'"
    document.write_text(document.read_text().replace("name: Old", secret))
    env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": sandbox.api_url, "PROMPT_TOKEN": "t0ken-123"}
    applied = botctl("apply", "--auto-approve", env=env)
    assert applied.exit_code == 0, applied.output
    assert (repo / ".botctl/state.json.key").is_file()
    assert "warning:" not in applied.stderr
    assert sorted(staged(repo)) == [
        ".gitignore",
        "botctl.yaml",
        f"bots/{document.name}",
        "schemas/botctl-project.schema.json",
        "schemas/botctl.schema.json",
    ]


# --- export --out --------------------------------------------------------------------------------


def test_export_ignores_the_local_files_and_its_hints_resolve(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No botctl.yaml: the repository is the git work tree --out is in; --out two levels
    deep: the hint climbs two."""
    repo = new_repository(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.tmp\n")
    monkeypatch.chdir(repo)
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=repo)
    bench.create_bot("bot-1", settings={"name": "One"})
    bench.create_bot("bot-2", settings={"name": "Two"})
    result = bench.run("export", "--all", "--out", "bots/team-a")
    assert result.exit_code == 0, result.output
    assert "wrote schemas/botctl.schema.json (editors check the documents)" in result.stdout
    assert "added to .gitignore (.botctl/:" in result.stdout
    assert (repo / ".gitignore").read_text().splitlines()[0] == "*.tmp"
    documents = sorted((repo / "bots/team-a").glob("*.yaml"))
    assert len(documents) == 2
    for document in documents:
        assert document.read_text().startswith(
            "# yaml-language-server: $schema=../../schemas/botctl.schema.json\n"
        )
        assert schema_of(document).is_file()
        assert yaml.safe_load(document.read_text())["kind"] == "Chatbot"
    # The baseline went to .botctl/ (the default state), which git now ignores.
    assert (repo / ".botctl/state.json").is_file()
    assert not any(name.startswith(".botctl/") for name in staged(repo))
    # Exported again elsewhere: the schema and the line are there, said so, not repeated.
    again = bench.run("export", "bot-1", "--out", "more")
    assert again.exit_code == 0, again.output
    assert "left alone schemas/botctl.schema.json (exists)" in again.stdout
    assert (repo / ".gitignore").read_text().count(".botctl/") == 1


def test_export_uses_the_project_files_directory(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside git, with botctl.yaml: its directory is the repository, from a subdirectory
    too."""
    repo = tmp_path / "repo"
    assert botctl("init", str(repo)).exit_code == 0
    (repo / ".gitignore").unlink()
    (repo / "schemas/botctl.schema.json").unlink()
    monkeypatch.chdir(repo / "bots")
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=repo)
    bench.create_bot("bot-1", settings={"name": "One"})
    result = bench.run("export", "--all", "--out", ".")
    assert result.exit_code == 0, result.output
    assert (repo / ".gitignore").read_text().splitlines()[-1] == ".botctl/"
    [document] = (repo / "bots").glob("*.yaml")
    assert schema_of(document) == repo / "schemas/botctl.schema.json"
    assert schema_of(document).is_file()
    assert (repo / ".botctl/state.json").is_file()  # botctl.yaml's state, relative to it


def test_export_to_standard_output_writes_nothing_else(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", settings={"name": "One"})
    before = set(tmp_path.iterdir())
    result = bench.run("export", "bot-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "# yaml-language-server: $schema=../schemas/botctl.schema.json\n"
    )
    assert set(tmp_path.iterdir()) == before


# --- the warning when a key file lands where git would commit it ---------------------------------


def init_key(state: Path) -> Result:
    return botctl("state", "init-key", "--write", "--state", str(state))


def test_a_key_file_git_would_commit_is_warned_about_with_the_line_to_add(
    tmp_path: Path,
) -> None:
    repo = new_repository(tmp_path / "repo")
    result = init_key(repo / ".botctl/state.json")
    assert result.exit_code == 0, result.output
    assert (
        f"warning: the state key file {repo}/.botctl/state.json.key is in the git work tree "
        f"{repo} and git does not ignore it: `git add -A` would commit the key. Add the line "
        f".botctl/ to {repo}/.gitignore (`botctl init {repo}` adds it)"
    ) in result.stderr
    assert ".botctl/state.json.key" in staged(repo)  # what the warning is about


def test_a_key_file_elsewhere_names_its_own_path(tmp_path: Path) -> None:
    """A state outside .botctl/ (and a name git would take for an option without `--`)."""
    repo = new_repository(tmp_path / "repo")
    (repo / "state").mkdir()
    result = init_key(repo / "state" / "-prod.json")
    assert result.exit_code == 0, result.output
    assert "Add the line /state/-prod.json.key to" in result.stderr
    assert "botctl init" not in result.stderr
    (repo / ".gitignore").write_text("/state/-prod.json.key\n")
    (repo / "state" / "-prod.json.key").unlink()
    quiet = init_key(repo / "state" / "-prod.json")
    assert quiet.exit_code == 0, quiet.output
    assert "warning:" not in quiet.stderr


def test_no_warning_where_git_ignores_it_or_there_is_no_git(tmp_path: Path) -> None:
    repo = new_repository(tmp_path / "repo")
    assert botctl("init", str(repo)).exit_code == 0
    ignored = init_key(repo / ".botctl/state.json")
    assert ignored.exit_code == 0, ignored.output
    assert "warning:" not in ignored.stderr
    plain = tmp_path / "not-a-repository"
    outside = init_key(plain / ".botctl/state.json")
    assert outside.exit_code == 0, outside.output
    assert "warning:" not in outside.stderr


def test_the_warning_comes_from_an_ordinary_run_too(sandbox: Any, tmp_path: Path) -> None:
    """The first apply with a ${secret:} makes the key file: warned once, the run fine."""
    repo = new_repository(tmp_path / "repo")
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=repo)
    bench.env = {"PROMPT_TOKEN": "t0ken-123"}
    bench.create_bot("bot-1", settings={"name": "Old"})
    bench.write("bot.yaml", bot_yaml(settings=SECRET_SETTINGS))
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: the state key file") == 1
    assert f"Add the line /state.json.key to {repo}/.gitignore" in result.stderr
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert "warning: the state key file" not in again.stderr  # made once, warned once


def test_init_below_the_top_of_a_work_tree_says_where_the_workflow_belongs(
    tmp_path: Path,
) -> None:
    top = new_repository(tmp_path / "monorepo")
    result = botctl("init", str(top / "chatbots"), "--ci", "github")
    assert result.exit_code == 0, result.output
    assert (
        "github reads it only at the repository's top: move it to "
        f"{top.resolve()}/.github/workflows/botctl.yml" in result.stdout
    )
    # The .gitignore of the subdirectory covers the state below it.
    (top / "chatbots/.botctl").mkdir()
    (top / "chatbots/.botctl/state.json.key").write_text("k")
    assert not any(".botctl" in name for name in staged(top))
