"""The botctl GitHub Action's step (``action.yml``): run one botctl command, then hand its
results to the workflow. ``python -m botctl.github_action``, inputs in the environment.

action.yml passes the inputs as ``INPUT_COMMAND``, ``INPUT_PATH``, ``INPUT_STATE``,
``INPUT_API_URL``, ``INPUT_ARGS`` and ``INPUT_CHANGED_SINCE`` (never pasted into a shell
line). A pull request's
plan is scoped to the merge base (``--changed-since``, see ``scope``) unless
``changed-since`` is ``full``. ``validate``, ``plan``, ``drift`` and ``test`` run with
``--format github``: problems annotated on the files (a failed conversation test on its
test), the report folded in the log, the summary as an annotation; ``plan``, ``drift`` and
``test`` also write the Markdown comment (``--comment-out``), and ``test`` its JUnit report
(``--junit``, in the runner's temporary directory). ``apply`` runs with ``--auto-approve``
(the workflow decides when to apply) and its output is relayed as inert text; with
``--test`` in ``args`` it writes the JUnit report too. Then:

- ``$GITHUB_STEP_SUMMARY`` gets the comment (or, when botctl failed before writing one, what
  failed);
- ``$GITHUB_OUTPUT`` gets ``exitcode`` (botctl's), ``has-changes`` (``true`` when the plan has
  changes, drift was found, or apply applied something), ``comment-file`` (a Markdown file
  that starts with ``<!-- botctl:COMMAND -->``, at most 60,000 characters) and ``junit-file``
  (the JUnit XML of the conversation tests, when they ran; else empty).

The step fails when botctl failed (exit 1, or a signal's 130/143) or a conversation test
failed (exit 3: ``test``, ``apply --test``); changes and drift (exit 2 of plan and drift) are
results, for the workflow to act on through ``has-changes``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from botctl import gitexec
from botctl.annotations import annotation, parse_command, visible
from botctl.errors import EXIT_CHANGES, EXIT_TEST_FAILED
from botctl.render import COMMENT_LIMIT
from botctl.render import blocks as md

COMMANDS = ("validate", "plan", "apply", "drift", "test")
SCOPED = ("plan", "apply", "drift")  # the commands --changed-since narrows
GITHUB_FORMAT = ("validate", "plan", "drift", "test")  # the commands run with --format github
COMMENTED = ("plan", "drift", "test")  # the commands that write their comment (--comment-out)
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")
# The exit codes that are a result, not a failure of the step: changes, drift.
RESULTS = {"plan": (0, EXIT_CHANGES), "drift": (0, EXIT_CHANGES)}
SET_BY_THE_ACTION = ("--format", "--comment-out")
_APPLIED = re.compile(r"^Apply (?:complete|incomplete): (\d+) applied", re.MULTILINE)


class InputError(Exception):
    """An input the action cannot run with; reported as an error annotation."""


@dataclass(frozen=True)
class Inputs:
    command: str
    paths: tuple[str, ...]
    state: str
    args: tuple[str, ...]
    # "auto" (a pull request's plan: scoped to the merge base), "full", or a git revision.
    changed_since: str = "auto"
    api_url: str = ""  # the operator's service URL (--api-url); empty: $BOTCTL_API_URL

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Inputs:
        command = environ.get("INPUT_COMMAND", "").strip()
        if command not in COMMANDS:
            raise InputError(
                f"input 'command' must be one of {', '.join(COMMANDS)}, got {command!r}"
            )
        try:
            paths = tuple(shlex.split(environ.get("INPUT_PATH", "")))
            args = tuple(shlex.split(environ.get("INPUT_ARGS", "")))
        except ValueError as exc:  # an unclosed quote
            raise InputError(
                f"inputs 'path' and 'args' are split like a shell line: {exc}"
            ) from None
        # The step reads --format github's output as workflow commands it may pass on: another
        # format there would hand the runner unescaped text.
        taken = [a for a in args if a.split("=", 1)[0] in SET_BY_THE_ACTION]
        if taken:
            raise InputError(f"input 'args' must not set {taken[0]}: the action sets it")
        changed_since = environ.get("INPUT_CHANGED_SINCE", "").strip() or "auto"
        if changed_since != "full" and any(a.split("=", 1)[0] == "--changed-since" for a in args):
            raise InputError(
                "input 'args' must not set --changed-since: give it as the input "
                "'changed-since' (full: no scope)"
            )
        state = environ.get("INPUT_STATE", "").strip()
        api_url = environ.get("INPUT_API_URL", "").strip()
        return cls(command, paths, state, args, changed_since, api_url)

    @property
    def junit(self) -> str | None:
        """The JUnit report's path given in ``args`` (``--junit FILE``), if any."""
        for i, arg in enumerate(self.args):
            if arg == "--junit" and i + 1 < len(self.args):
                return self.args[i + 1]
            if arg.startswith("--junit="):
                return arg.removeprefix("--junit=")
        return None

    @property
    def tests(self) -> bool:
        """Whether the command runs conversation tests (``test``, ``apply --test``)."""
        return self.command == "test" or (self.command == "apply" and "--test" in self.args)


@dataclass(frozen=True)
class Outcome:
    exitcode: int
    has_changes: bool
    comment: str  # the comment file's text, marker first


def botctl_argv(
    inputs: Inputs, comment_file: Path, since: str | None = None, junit_file: Path | None = None
) -> list[str]:
    """The botctl command line for these inputs (``since``: the revision to scope to;
    ``junit_file``: where the conversation tests' JUnit report goes, when they run)."""
    argv = [sys.executable, "-m", "botctl", inputs.command, *inputs.paths]
    if since is not None and inputs.command in SCOPED:
        argv += ["--changed-since", since]
    if inputs.state and inputs.command != "validate":
        argv += ["--state", inputs.state]
    if inputs.api_url and inputs.command != "validate":
        argv += ["--api-url", inputs.api_url]
    if inputs.command in GITHUB_FORMAT:
        argv += ["--format", "github"]
    if inputs.command in COMMENTED:
        argv += ["--comment-out", str(comment_file)]
    if junit_file is not None and inputs.tests and inputs.junit is None:
        argv += ["--junit", str(junit_file)]
    if inputs.command == "plan":
        argv.append("--detailed-exitcode")
    if inputs.command == "apply":
        argv.append("--auto-approve")
    return argv + list(inputs.args)


def scope(inputs: Inputs, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The revision to scope the command to, and a warning to show when it was to be scoped
    and cannot be. ``auto``: a pull request's plan is scoped to the merge base of its base
    commit and the checkout (the nightly drift and the apply on merge stay full); ``full``:
    never; anything else: that revision, for any command that takes it."""
    if inputs.command not in SCOPED or inputs.changed_since == "full":
        return None, None
    if inputs.changed_since != "auto":
        return inputs.changed_since, None
    if inputs.command != "plan" or environ.get("GITHUB_EVENT_NAME") not in PULL_REQUEST_EVENTS:
        return None, None
    base = _pull_request_base(environ.get("GITHUB_EVENT_PATH", ""))
    if base is None:
        return None, "the pull request's base commit is not in the event: planned in full"
    found = _git("merge-base", "--end-of-options", base, "HEAD")
    if found is None:  # a shallow checkout: fetch the base, then its history as needed
        _git("fetch", "--no-tags", "--quiet", "--depth=50", "--end-of-options", "origin", base)
        found = _git("merge-base", "--end-of-options", base, "HEAD")
    if found is None:
        _git("fetch", "--no-tags", "--quiet", "--unshallow", "--end-of-options", "origin")
        found = _git("merge-base", "--end-of-options", base, "HEAD")
    if found is None:
        return None, (
            f"no merge base of the pull request's base {base[:12]} and the checkout (check out "
            "with fetch-depth: 0): planned in full"
        )
    return found, None


def _pull_request_base(event_path: str) -> str | None:
    try:
        with open(event_path, encoding="utf-8") as handle:
            event = json.load(handle)
        sha = event["pull_request"]["base"]["sha"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40,64}", sha) else None


def _git(*args: str) -> str | None:
    runner = gitexec.Git(gitexec.environment(os.environ), gitexec.default_timeout())
    try:
        done = runner.run(args)
    except gitexec.GitError:
        return None
    out = done.stdout.decode("utf-8", "replace").strip()
    return out or None if done.returncode == 0 else None


def run(
    inputs: Inputs, comment_file: Path, since: str | None = None, junit_file: Path | None = None
) -> Outcome:
    argv = botctl_argv(inputs, comment_file, since, junit_file)
    if inputs.command == "apply":
        code, output = stream_inert(argv)
        applied = sum(int(n) for n in _APPLIED.findall(output))
        return Outcome(code, applied > 0, apply_comment(output, code))
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    # --format github prints only workflow commands, escaped: the runner may read them.
    sys.stdout.write(done.stdout)
    print_inert(done.stderr.splitlines())
    comment = comment_file.read_text(encoding="utf-8")
    if not comment:  # validate, or a plan, drift or test that failed before its report
        comment = problems_comment(inputs.command, done.returncode, done.stdout, done.stderr)
    changes = inputs.command in RESULTS and done.returncode == EXIT_CHANGES
    return Outcome(done.returncode, changes, comment)


def failed(command: str, code: int) -> bool:
    """Whether botctl's exit code fails the step: an error or a failed conversation test
    always; plan's changes and drift's drift (2) are results."""
    return code not in RESULTS.get(command, (0,))


def problems_comment(command: str, code: int, annotations: str, stderr: str) -> str:
    """The outcome as a comment when botctl wrote none: valid, or what failed (so that a
    comment left by an earlier run is never taken for the current state). Lists the errors
    and warnings botctl annotated (decoded from its output), else the end of its errors."""
    doc = md.Budget(COMMENT_LIMIT - len(marker(command)) - 1)
    if code == 0:
        doc.add(f"### botctl {command}", "", "The configuration is valid.")
    else:
        doc.add(f"### botctl {command}", "", f"**botctl {command} failed** (exit code {code}).")
    problems = []
    for line in annotations.splitlines():
        parsed = parse_command(line)
        if parsed is not None and parsed.name in ("error", "warning") and parsed.data:
            where = ":".join(
                parsed.properties[k] for k in ("file", "line", "col") if k in parsed.properties
            )
            label = f"{md.code(where)} " if where else ""
            problems.append(
                md.Row((f"- {parsed.name}: {label}{md.text(parsed.data)}",), {parsed.name: 1})
            )
    if not problems and stderr.strip():
        lines = stderr.strip().splitlines()[-40:]
        opening, closing = md.fence(lines, "text")
        problems = [md.Row((line,), {"line": 1}) for line in lines]
        doc.section(["", opening], problems, [closing], "... {more} not shown")
    else:
        doc.section([""], problems, [], "- ... {more} not shown")
    return f"{marker(command)}\n{doc.render()}"


def apply_comment(output: str, code: int) -> str:
    """apply's log as Markdown: its closing summary first, then the log, cut to fit."""
    lines = output.rstrip("\n").splitlines()
    closing_lines = [
        line for line in lines if line.startswith(("Apply complete", "Apply incomplete"))
    ]
    doc = md.Budget(COMMENT_LIMIT - len(marker("apply")) - 1)
    tests = [line for line in lines if line.startswith("Tests: ")]
    if code == EXIT_TEST_FAILED:
        status = f" **Conversation tests failed** (exit code {code})."
    else:
        status = "" if code == 0 else f" **Failed** (exit code {code})."
    head = md.text(closing_lines[-1]) if closing_lines else "Nothing was applied."
    doc.add("### botctl apply", "", head + status)
    if tests:  # apply --test: the tests' summary, what failed and the rollback in view
        doc.add("", f"**{md.text(tests[-1])}**")
        failing = _failed_tests(lines)
        opening, closing = md.fence([line for row in failing for line in row.lines], "text")
        doc.section(
            ["", "Failed or not run:", "", opening], failing, [closing], "... {more} not shown"
        )
        rollback = [line for line in lines if line.startswith("Rollback: ")]
        if rollback:
            doc.add("", md.text(rollback[-1]))
    opening, closing = md.fence(lines, "text")
    doc.section(
        ["", "<details><summary>Log</summary>", "", opening],
        [md.Row((line,), {"line": 1}) for line in lines],
        [closing, "", "</details>"],
        "... {more} not shown",
    )
    return f"{marker('apply')}\n{doc.render()}"


def _failed_tests(lines: Sequence[str]) -> list[md.Row]:
    """From apply --test's log: each test that failed or could not run, with the indented
    lines that say why (the failing expectation and the quoted answer)."""
    groups: list[list[str]] = []
    inside = False
    for line in lines:
        if line.startswith(("FAIL ", "ERROR ")):
            groups.append([line])
            inside = True
        elif inside and line.startswith("      "):
            groups[-1].append(line)
        else:
            inside = False
    return [md.Row(tuple(group), {"failed test": 1}) for group in groups]


def marker(command: str) -> str:
    return f"<!-- botctl:{command} -->"


def stream_inert(argv: Sequence[str]) -> tuple[int, str]:
    """Run, relaying output line by line as it comes, between stop-commands markers (a random
    token: the output cannot end the block), and return the code and the output."""
    token = "botctl-" + secrets.token_hex(16)
    print(f"::stop-commands::{token}", flush=True)
    captured: list[str] = []
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            captured.append(line)
            print(visible(line.rstrip("\n")), flush=True)
    print(f"::{token}::", flush=True)
    return process.returncode, "".join(captured)


def print_inert(lines: Sequence[str]) -> None:
    if lines:
        token = "botctl-" + secrets.token_hex(16)
        shown = [visible(line) for line in lines]
        print("\n".join([f"::stop-commands::{token}", *shown, f"::{token}::"]), flush=True)


def set_outputs(path: str, outputs: Mapping[str, str]) -> None:
    """Append to $GITHUB_OUTPUT, in the multi-line form when a value spans lines."""
    with open(path, "a", encoding="utf-8") as out:
        for name, value in outputs.items():
            if "\n" in value or "\r" in value:
                delimiter = "ghadelimiter_" + secrets.token_hex(16)
                out.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                out.write(f"{name}={value}\n")


def _mtime(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size


def main(environ: Mapping[str, str] = os.environ) -> int:
    try:
        inputs = Inputs.from_environ(environ)
    except InputError as exc:
        print(annotation("error", str(exc), title="botctl action"))
        return 1
    directory = environ.get("RUNNER_TEMP") or tempfile.gettempdir()
    handle, name = tempfile.mkstemp(prefix=f"botctl-{inputs.command}-", suffix=".md", dir=directory)
    os.close(handle)
    comment_file = Path(name)  # empty: botctl writes it, or this step does
    # botctl writes the JUnit report when tests run: where args say, else beside the comment.
    junit_file = Path(os.path.abspath(inputs.junit or Path(name).with_suffix(".junit.xml")))
    before = _mtime(junit_file)  # a report left by an earlier run is not this one's
    since, warning = scope(inputs, environ)
    if warning is not None:
        print(annotation("warning", warning, title="botctl action: changed-since"), flush=True)
    outcome = run(inputs, comment_file, since, junit_file)
    written = junit_file.is_file() and _mtime(junit_file) != before
    comment_file.write_text(outcome.comment, encoding="utf-8")
    if environ.get("GITHUB_STEP_SUMMARY"):
        with open(environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as summary:
            summary.write(outcome.comment + "\n")
    if environ.get("GITHUB_OUTPUT"):
        set_outputs(
            environ["GITHUB_OUTPUT"],
            {
                "exitcode": str(outcome.exitcode),
                "has-changes": "true" if outcome.has_changes else "false",
                "comment-file": str(comment_file),
                "junit-file": str(junit_file) if written else "",
            },
        )
    return outcome.exitcode if failed(inputs.command, outcome.exitcode) else 0


if __name__ == "__main__":
    sys.exit(main())
