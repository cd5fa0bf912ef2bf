"""The project file botctl.yaml (botctl.config.project) and the warning codes (botctl.lint):
found by walking up, validated with located errors, paths relative to the file, its
checked-in JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from botctl import lint
from botctl.config.project import find_project, load_project, project_json_schema
from botctl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "botctl-project.schema.json"
HEAD = "apiVersion: botctl/v1\nkind: Project\n"


def test_found_in_the_directory_or_the_nearest_parent(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    outside = find_project(deep)
    assert outside is None or tmp_path not in outside.parents
    (tmp_path / "botctl.yaml").write_text(HEAD)
    assert find_project(deep) == tmp_path / "botctl.yaml"
    (tmp_path / "a" / "botctl.yml").write_text(HEAD)
    assert find_project(deep) == tmp_path / "a" / "botctl.yml"  # the nearest wins
    assert find_project(tmp_path) == tmp_path / "botctl.yaml"


def test_paths_are_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / "sub").mkdir(parents=True)
    file = tmp_path / "repo" / "botctl.yaml"
    file.write_text(HEAD + "paths: [bots, shared/sets]\nstate: .botctl/state.json\n")
    monkeypatch.chdir(tmp_path / "repo" / "sub")
    project = load_project(file, {})
    assert project.paths == (Path("../bots"), Path("../shared/sets"))
    assert project.state == Path("../.botctl/state.json")
    assert (tmp_path / "repo" / "sub" / project.paths[0]).resolve() == (
        tmp_path / "repo" / "bots"
    ).resolve()


def test_every_field(tmp_path: Path) -> None:
    file = tmp_path / "botctl.yaml"
    file.write_text(
        HEAD + "paths: [bots]\napiUrl: https://${HOST:-example.test}/api/v1\nstate: s.json\n"
        "parallelism: 4\nrateLimit: 9.5\nallowUnknownModels: true\nmaxArchives: 7\n"
        "lint: {disable: [BC101, overrides-set]}\n"
    )
    project = load_project(file, {"HOST": "svc.test"})
    settings = project.settings
    assert settings.apiUrl == "https://svc.test/api/v1"
    assert (settings.parallelism, settings.rateLimit, settings.maxArchives) == (4, 9.5, 7)
    assert settings.allowUnknownModels is True
    assert project.disabled_warnings == {"BC101", "BC201"}
    assert project.value("parallelism") == 4
    assert project.value("apiUrl") == "https://svc.test/api/v1"


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"),
    [
        ("paths: [bots]\n", 1, 1, "missing required key 'apiVersion'"),
        (
            HEAD + "parallelisim: 4\n",
            3,
            1,
            "unknown key 'parallelisim' (did you mean 'parallelism'?)",
        ),
        (HEAD + "parallelism: 0\n", 3, 14, "parallelism: must be at least 1"),
        (HEAD + "parallelism: '4'\n", 3, 14, "parallelism: must be an integer"),
        (HEAD + "paths: bots\n", 3, 8, "paths: must be a list"),
        (
            HEAD + "lint: {disable: [BC1O1]}\n",
            3,
            18,
            "'BC1O1' is not a warning code (did you mean 'BC101'?)",
        ),
        (HEAD + "apiUrl: ${API_HOST}\n", 3, 9, "environment variable API_HOST is not set"),
        (HEAD + "paths: [a\n", 4, 1, "invalid YAML"),
        (HEAD.replace("Project", "Chatbot"), 2, 7, "kind: must be one of 'Project'"),
        ("- a\n", 1, 1, "a project file must be a mapping"),
        (HEAD + "---\n" + HEAD, 1, 1, "a project file holds exactly one document"),
    ],
)
def test_problems_are_located(
    tmp_path: Path, text: str, line: int, col: int, fragment: str
) -> None:
    file = tmp_path / "botctl.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_project(file, {})
    problem = info.value.problems[0]
    assert (problem.file, problem.line, problem.col) == (str(file), line, col), str(problem)
    assert fragment in problem.message


def test_checked_in_project_schema_is_current() -> None:
    expected = json.dumps(project_json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA.read_text(encoding="utf-8") == expected, (
        "schemas/botctl-project.schema.json is stale; regenerate it with "
        "`uv run botctl schema --project > schemas/botctl-project.schema.json`"
    )


def test_the_example_project_file_loads_and_validates_against_the_schema() -> None:
    jsonschema: Any = pytest.importorskip("jsonschema")
    example = ROOT / "examples" / "botctl.yaml"
    load_project(example, {})
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    assert [e.message for e in validator.iter_errors(yaml.safe_load(example.read_text()))] == []
    first = example.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/botctl-project.schema.json"


# --- warning codes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "code"),
    [
        ("BC101", "BC101"),
        ("bc101", "BC101"),
        ("attribute-name-style", "BC101"),
        (" BC201 ", "BC201"),
    ],
)
def test_a_code_is_named_by_number_or_name(word: str, code: str) -> None:
    found = lint.lookup(word)
    assert found is not None
    assert found.code == code


def test_codes_are_unique_and_documented() -> None:
    codes = [c.code for c in lint.CODES]
    names = [c.name for c in lint.CODES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    readme = (ROOT / "README.md").read_text()
    for c in lint.CODES:
        assert f"| `{c.code}` | `{c.name}` |" in readme, f"README lists no {c.code}"


def test_unknown_words_are_returned_with_a_hint() -> None:
    codes, unknown = lint.codes_of(["BC101", "unknown-modle", "nope"])
    assert codes == {"BC101"}
    assert unknown == ["unknown-modle", "nope"]
    assert "(did you mean 'unknown-model'?)" in lint.unknown_code("unknown-modle")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("bots/a.yaml:3:5: warning[BC101]: attribute name 'X'", "BC101"),
        ("bots/a.yaml:3:5: error[BC101]: attribute name 'X'", "BC101"),
        ("warning[BC302]: support: styles is sent whole", "BC302"),
        ("bots/a.yaml:3:5: warning: no code", None),
        ("support: mentions warning[BC999]: inside", None),
    ],
)
def test_the_code_a_formatted_warning_carries(text: str, code: str | None) -> None:
    assert lint.code_of(text) == code


def test_without_disabled_keeps_uncoded_and_enabled_warnings() -> None:
    warnings = [
        "a.yaml:1:1: warning[BC101]: x",
        "warning[BC302]: y",
        "a.yaml:2:1: warning: z",
    ]
    assert lint.without_disabled(warnings, frozenset({"BC302"})) == (warnings[0], warnings[2])
    assert lint.without_disabled(warnings, frozenset()) == tuple(warnings)


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        ("['/etc']", "'/etc' is absolute"),
        ("[bots, '../../etc/passwd']", "'../../etc/passwd' leaves the repository"),
        ("['sub/../../x']", "'sub/../../x' leaves the repository"),
        ("[out]", "'out' leads out of the repository"),  # a symbolic link
    ],
)
def test_paths_stay_inside_the_repository(tmp_path: Path, paths: str, why: str) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "out").symlink_to(tmp_path)
    file = repo / "botctl.yaml"
    file.write_text(HEAD + f"paths: {paths}\n")
    with pytest.raises(ConfigError) as refused:
        load_project(file, {})
    assert f"{file}:3:" in str(refused.value)  # located at the path
    assert why in str(refused.value)


def test_a_project_file_in_a_subdirectory_may_name_the_repositorys_other_directories(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "bots").mkdir()
    (repo / "shared").mkdir()
    (repo / "bots" / "inner").symlink_to(repo / "shared")  # a link that stays inside
    file = repo / "bots" / "botctl.yaml"
    file.write_text(HEAD + "paths: [., ../shared, inner]\n")
    assert len(load_project(file, {}).paths) == 3
    # Without a repository around it, the file's own directory is the boundary.
    alone = tmp_path / "alone" / "botctl.yaml"
    alone.parent.mkdir()
    alone.write_text(HEAD + "paths: [../repo]\n")
    with pytest.raises(ConfigError, match="leaves the repository"):
        load_project(alone, {})
