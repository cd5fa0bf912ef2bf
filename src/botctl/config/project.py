"""The project file, ``botctl.yaml`` at the configuration repository's root: what every command
would otherwise be told by flags in every CI step (paths, API URL, state, parallelism, rate
limit, ``allowUnknownModels``, silenced warnings).

Found by walking up from the working directory (or named by ``--config`` / ``BOTCTL_CONFIG``).
Relative paths in it are relative to its own directory, so a command behaves the same from any
subdirectory. Flags and environment variables override it (``cli.options``). Strings may use
``${VAR}`` and ``${VAR:-default}``, as documents do (the variables the operator exposes:
``botctl.trust``).

The file is a repository's (README, "Trust"): its ``paths`` stay inside the repository that
holds it (the nearest parent with ``.git``, else its own directory; an agent's revision), so an
absolute path, a ``..`` leaving it or a symbolic link leading out is a located error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from botctl import lint
from botctl.config.document import code_items
from botctl.config.interpolate import Interpolator, interpolate_tree
from botctl.config.messages import located_errors
from botctl.config.yamlnodes import parse_documents
from botctl.errors import ConfigError, Problem

PROJECT_FILE_NAMES = ("botctl.yaml", "botctl.yml")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a state that is not a path: as written


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class ProjectLint(_Strict):
    disable: tuple[str, ...] = Field(
        default=(), description="Warning codes (BC101) or names not to report in any run."
    )


REDACT_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")  # `[label]` replaces what a pattern finds


class RedactPattern(_Strict):
    """A pattern of personal data: what it finds is written ``[label]``."""

    label: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="What a finding is written as, in brackets: a letter, then letters, digits, "
        "'_' or '-'."
    )
    pattern: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="A regular expression (Python syntax)."
    )

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not REDACT_LABEL.fullmatch(value):
            raise ValueError("must be a letter, then letters, digits, '_' or '-'")
        return value

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        return value


class ProjectFile(_Strict):
    """botctl.yaml. Every field is optional; a flag or environment variable overrides it."""

    apiVersion: Literal["botctl/v1"]
    kind: Literal["Project"]
    paths: tuple[Annotated[str, StringConstraints(min_length=1)], ...] = Field(
        default=(),
        description="The configuration's files and directories, relative to this file; "
        "commands given no PATH use them.",
    )
    apiUrl: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        default=None, description="Service base URL ending in /api/v1 (--api-url, BOTCTL_API_URL)."
    )
    state: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        default=None,
        description="Where the state lives: a path relative to this file, or a git+ or s3:// "
        "URL (--state, BOTCTL_STATE).",
    )
    stateEncryption: Literal["none", "passphrase"] | None = Field(
        default=None,
        description="passphrase: a new state (and the plans saved against it) is kept "
        "encrypted under BOTCTL_STATE_KEY; an existing state keeps its own setting "
        "(--state-encryption, BOTCTL_STATE_ENCRYPTION).",
    )
    parallelism: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None, description="Chatbots processed at once (--parallelism)."
    )
    rateLimit: Annotated[float, Field(ge=0)] | None = Field(
        default=None,
        description="At most N requests per second per API key; 0 is off (--rate-limit).",
    )
    allowUnknownModels: bool | None = Field(
        default=None,
        description="A settings model missing from botctl's list is a warning, not an error "
        "(--allow-unknown-models).",
    )
    maxArchives: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="Most attributes one run may archive (--max-archives)."
    )
    lint: ProjectLint | None = None
    redact: tuple[RedactPattern, ...] = Field(
        default=(),
        description="More personal data `botctl conversations pull` redacts, beside e-mail "
        "addresses, telephone numbers, payment ids and the contacts' names (--redact).",
    )


@dataclass(frozen=True)
class Project:
    """A loaded project file; paths already resolved against its directory."""

    file: Path
    settings: ProjectFile
    disabled_warnings: frozenset[str]
    # line:column of each top-level field's value, for messages about it
    places: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    boundary: Path | None = None  # what its paths stay inside (None: the file's repository)

    @property
    def root(self) -> Path:
        return self.file.parent

    def escapes(self, relative: str) -> str | None:
        """Why the path ``relative`` (to this file) leaves its repository, or None."""
        return _leaves(self.root, relative, self.boundary or repository_root(self.root))

    def at(self, name: str) -> str:
        """``file:line:col`` of the field ``name`` (the file alone when it is not set)."""
        place = self.places.get(name)
        return f"{self.file}:{place[0]}:{place[1]}" if place else str(self.file)

    def resolve(self, relative: str) -> Path:
        """A path of the file, as the working directory sees it (relative when it can be)."""
        path = self.root / relative
        try:
            return Path(os.path.relpath(path))
        except ValueError:  # another drive (Windows)
            return path

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(self.resolve(p) for p in self.settings.paths)

    @property
    def state(self) -> str | Path | None:
        """The state's location: a path relative to this file, or a URL (git+..., s3://...)
        as written."""
        state = self.settings.state
        if state is None or _URL.match(state):
            return state
        return self.resolve(state)

    def value(self, field: str) -> Any:
        """A field of the file, paths resolved; None when the file does not set it."""
        return self.state if field == "state" else getattr(self.settings, field)


def find_project(start: Path) -> Path | None:
    """The nearest botctl.yaml (or .yml) in ``start`` or one of its parents."""
    for directory in (start, *start.parents):
        for name in PROJECT_FILE_NAMES:
            candidate = directory / name
            if candidate.is_file():
                return candidate
    return None


def repository_root(start: Path) -> Path:
    """The top of the git repository holding ``start`` (the nearest parent with a ``.git``),
    else ``start`` itself."""
    start = Path(os.path.abspath(start))
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def load_project(
    file: Path,
    environ: Mapping[str, str],
    *,
    text: str | None = None,
    boundary: Path | None = None,
) -> Project:
    """Read and validate a project file (``text``: its content as given, e.g. at a git
    revision, whose reader keeps its paths inside); raises ConfigError with every problem,
    located. ``paths`` must stay inside ``boundary`` (default: the repository holding the
    file)."""
    contained = boundary is not None or text is None  # a revision's reader checks its own
    if text is None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            problem = Problem(str(file), 1, 1, f"cannot read the project file: {reason}")
            raise ConfigError([problem]) from None
    documents, problems = parse_documents(text, str(file))
    if not problems and len(documents) != 1:
        problems.append(Problem(str(file), 1, 1, "a project file holds exactly one document"))
    if problems:
        raise ConfigError(problems)
    doc = documents[0]
    if not isinstance(doc.value, dict):
        raise ConfigError([doc.problem((), "a project file must be a mapping")])
    data = interpolate_tree(
        doc.value,
        Interpolator(environ),
        lambda path, message: problems.append(doc.problem(path, message)),
    )
    settings = None
    try:
        settings = ProjectFile.model_validate(data)
    except ValidationError as exc:
        problems += located_errors(doc, (), ProjectFile, exc)
    if settings is not None and contained:
        inside = boundary if boundary is not None else repository_root(file.parent)
        for i, relative in enumerate(settings.paths):
            why = _leaves(file.parent, relative, inside)
            if why is not None:
                problems.append(doc.problem(("paths", i), why))
    words = settings.lint.disable if settings is not None and settings.lint else ()
    disabled, _ = lint.codes_of(words)
    for i, word in enumerate(words):
        if lint.lookup(word) is None:
            problems.append(doc.problem(("lint", "disable", i), lint.unknown_code(word)))
    if problems or settings is None:
        raise ConfigError(problems)
    places = {k: doc.mark((k,)) for k in doc.value if isinstance(k, str)}
    return Project(file, settings, disabled, places, boundary)


def _leaves(base: Path, relative: str, boundary: Path) -> str | None:
    """Why the path ``relative`` (to ``base``) is not inside ``boundary``, or None."""
    written = os.path.normpath(os.path.join(os.path.abspath(base), relative))
    if not within(written, os.path.abspath(boundary)):
        if PurePath(relative).is_absolute():
            return (
                f"{relative!r} is absolute, outside the repository ({boundary}): paths are "
                "relative to the project file and stay inside it"
            )
        return f"{relative!r} leaves the repository ({boundary}): paths stay inside it"
    if not within(os.path.realpath(written), os.path.realpath(boundary)):
        return (
            f"{relative!r} leads out of the repository ({boundary}) through a symbolic link: "
            "paths stay inside it"
        )
    return None


def within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (both absolute, as given)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def project_json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of botctl.yaml."""
    schema = ProjectFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "botctl project file (botctl.yaml)"
    schema["$defs"]["ProjectLint"]["properties"]["disable"]["items"] = code_items()
    return schema
