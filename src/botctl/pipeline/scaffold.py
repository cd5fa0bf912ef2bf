"""A configuration repository's own files: what ``botctl init`` scaffolds, and the part of it
``botctl export --out`` sees to.

- ``botctl.yaml``, the project file, with botctl's defaults written out as comments;
- ``bots/``, where the documents go (``export --all --out bots/`` fills it);
- ``.gitignore`` keeping ``.botctl/`` (the local state, its key file, the sandbox's database)
  out of git: merged into the file the repository has, never a line twice;
- ``schemas/botctl.schema.json`` and ``schemas/botctl-project.schema.json``: the JSON
  Schemas the documents' and the project file's ``# yaml-language-server: $schema=`` lines
  name, by a path relative to each file, so an editor finds them offline, in the repository
  itself (``.botctl/`` is ignored, so not there);
- with ``--ci``, the CI workflow of ``docs/ci`` (shipped in the package).

Every file is written only when absent (the ``.gitignore`` excepted: a line is added to it),
so a second run writes nothing; each ``Outcome`` says what was done and why.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import botctl
from botctl import defaults
from botctl.config.export import DOCUMENTS_SCHEMA, schema_line
from botctl.errors import BotctlError
from botctl.store.files import read_text_if_any, write_new_file
from botctl.store.gitignore import LOCAL_DIR, ensure_ignored, work_tree_top

DOCUMENTS_DIR = "bots"
PROJECT_SCHEMA = "schemas/botctl-project.schema.json"
# --ci: the workflow of docs/ci, and where that CI reads it from.
CI_FILES = {
    "github": ("github-workflow.yml", ".github/workflows/botctl.yml"),
    "gitlab": ("gitlab-ci.yml", ".gitlab-ci.yml"),
}
Done = Literal["wrote", "added", "kept", "differs"]


@dataclass(frozen=True)
class Outcome:
    """What became of one file: ``wrote`` (created), ``added`` (a line appended), ``kept``
    (left alone: it was there), ``differs`` (left alone, though not what botctl would write)."""

    path: Path
    done: Done
    why: str


def schema_text(schema: dict[str, Any]) -> str:
    """A JSON Schema as `botctl schema` prints it (and the checked-in copies hold it)."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schema_hint(root: Path, directory: Path) -> str:
    """The documents' schema of the repository at ``root``, as a file in ``directory`` names
    it: relative, with forward slashes (what yaml-language-server resolves)."""
    target = root.resolve() / DOCUMENTS_SCHEMA
    return Path(os.path.relpath(target, directory.resolve())).as_posix()


def repository_root(project_root: Path | None, out: Path) -> Path:
    """The configuration repository a command writes into at ``out``: the project file's
    directory when there is one, else the top of the git work tree ``out`` is in, else
    ``out``'s parent (``export --out bots/`` run from the repository's root)."""
    if project_root is not None:
        return project_root
    top = work_tree_top(out.absolute())
    return top if top is not None else out.absolute().parent


def project_file_text() -> str:
    """``botctl.yaml`` as init writes it: what it sets, and every other field with botctl's
    default, commented out (a flag or environment variable overrides any of them)."""
    return f"""\
{schema_line(PROJECT_SCHEMA)}
# botctl's project file: what every command would otherwise be told (README "The project
# file"). A flag or environment variable overrides any value; paths are relative to this file.
apiVersion: botctl/v1
kind: Project
# The configuration, when a command is given no PATH.
paths: [{DOCUMENTS_DIR}]
# The state: a local file (.gitignore keeps .botctl/ out of git), or shared by every run
# (CI, the agent): git+<repo-url>#<branch>:<path>, or s3://<bucket>/<key>.
state: {defaults.DEFAULT_STATE_PATH.as_posix()}
# The service (or BOTCTL_API_URL). The API key comes from BOTCTL_API_KEY only, never a file.
# apiUrl: https://<service-host>/api/v1
# passphrase: a new state is kept encrypted under BOTCTL_STATE_KEY.
# stateEncryption: none
# Chatbots processed at once.
# parallelism: {defaults.DEFAULT_PARALLELISM}
# At most N requests per second per API key (0: off); a plan says how long it takes at it.
# rateLimit: 0
# A settings model newer than this botctl: a warning, not an error.
# allowUnknownModels: false
# Most attributes one run may archive.
# maxArchives: {defaults.DEFAULT_MAX_ARCHIVES}
# Warning codes no run reports.
# lint:
#   disable: [BC101]
"""


def _packaged(name: str) -> Path:
    """A file of docs/ci: package data of an installed wheel (botctl/ci), else docs/ci of
    the source checkout botctl runs from."""
    package = Path(botctl.__file__).resolve().parent
    for candidate in (package / "ci" / name, package.parents[1] / "docs" / "ci" / name):
        if candidate.is_file():
            return candidate
    raise BotctlError(f"this botctl's installation lacks its CI template {name}")


def ci_template(ci: str) -> tuple[str, str]:
    """--ci: where the workflow goes in the repository, and its text."""
    name, destination = CI_FILES[ci]
    text = read_text_if_any(_packaged(name), "the CI template", BotctlError)
    assert text is not None  # _packaged found the file
    return destination, text


def _new(root: Path, relative: str, text: str, why: str, *, update: str = "") -> Outcome:
    """Write ``root/relative`` unless it exists: never over a file (someone's edits are
    theirs). ``update``: for a file botctl generates, how to bring one that differs up to
    date (said instead of "exists")."""
    path = root / relative
    if path.is_symlink() or path.exists():
        if update and path.is_file() and read_text_if_any(path, "the file", BotctlError) != text:
            return Outcome(path, "differs", f"not this botctl's; {update}")
        return Outcome(path, "kept", "exists")
    try:
        created = write_new_file(path, text)
    except OSError as exc:
        raise BotctlError(f"cannot write {path}: {exc.strerror}") from None
    return Outcome(path, "wrote" if created else "kept", why if created else "exists")


def ignore_local_files(root: Path) -> Outcome:
    """``root/.gitignore`` keeps ``.botctl/`` out of git."""
    merged = ensure_ignored(root)
    if not merged.added:
        return Outcome(merged.path, "kept", f"already keeps {LOCAL_DIR} out of git")
    done: Done = "wrote" if merged.created else "added"
    return Outcome(merged.path, done, f"{LOCAL_DIR}: the state's key file is never committed")


def documents_schema(root: Path) -> Outcome:
    """``root/schemas/botctl.schema.json``: the schema the documents' first lines name."""
    from botctl.config.document import json_schema

    update = f"`botctl schema > {DOCUMENTS_SCHEMA}` updates it"
    text = schema_text(json_schema())
    return _new(root, DOCUMENTS_SCHEMA, text, "editors check the documents", update=update)


def scaffold(root: Path, ci: str | None = None) -> list[Outcome]:
    """Everything ``botctl init`` writes in ``root`` (created when missing), each file's
    outcome; the project file's first."""
    from botctl.config.project import PROJECT_FILE_NAMES, project_json_schema

    if root.exists() and not root.is_dir():
        raise BotctlError(f"{root} is not a directory")
    # A botctl.yml is the project file as much as a botctl.yaml: never a second one.
    held = next((name for name in PROJECT_FILE_NAMES if (root / name).exists()), None)
    name = held or PROJECT_FILE_NAMES[0]
    outcomes = [_new(root, name, project_file_text(), "the project file")]
    bots = root / DOCUMENTS_DIR
    if bots.is_dir():
        outcomes.append(Outcome(bots, "kept", "exists"))
    else:
        try:
            bots.mkdir(parents=True)
        except OSError as exc:
            raise BotctlError(f"cannot make {bots}: {exc.strerror}") from None
        outcomes.append(Outcome(bots, "wrote", "the documents go here"))
    outcomes.append(ignore_local_files(root))
    outcomes.append(documents_schema(root))
    project = schema_text(project_json_schema())
    update = f"`botctl schema --project > {PROJECT_SCHEMA}` updates it"
    outcomes.append(_new(root, PROJECT_SCHEMA, project, "editors check botctl.yaml", update=update))
    if ci is not None:
        outcomes.append(_workflow(root, ci))
    return outcomes


def _workflow(root: Path, ci: str) -> Outcome:
    """--ci: the workflow, in ``root``; where ``root`` is below the top of its git work tree,
    the CI reads it only at the top, which the outcome says."""
    destination, text = ci_template(ci)
    why = f"the {ci} workflow: adjust its marked lines"
    top = work_tree_top(root)
    if top is not None and top.resolve() != root.resolve():
        why += f"; {ci} reads it only at the repository's top: move it to {top / destination}"
    return _new(root, destination, text, why)
