"""Imports point one way (ARCHITECTURE.md). The edges are derived from the code (every import,
including those inside functions); an edge to a higher layer, or across to a sibling of the
same rank, fails here naming it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "botctl"

# Layers, top to bottom: a module may import its own package and any layer below its own.
RANKS: list[set[str]] = [
    {"__main__", "github_action"},  # entry points: `python -m botctl`, the GitHub Action
    {"cli"},
    {"agent"},  # the GitOps loop: sources, cycles over pipeline's flows, listener, notifications
    {"pipeline"},
    {"render"},
    {"annotations"},  # GitHub workflow commands, escaped: for render and the CLI
    {"reconcile", "conversation"},  # siblings: conversation tests run beside the reconciler
    {"config", "service", "store"},  # siblings: none imports another
    {"models"},
    {"resources"},
    {"plan"},
    {"sandbox"},  # the service emulator: shares nothing with the client but the contract
    {"sealing"},  # secrets kept out of files: fingerprints, and a saved plan's secret pieces
    {"gitexec", "trust"},  # git run one hardened way; what repository files may read
    {"contract", "errors", "values", "defaults", "lint", "language", "__init__"},
]
RANK = {unit: i for i, units in enumerate(RANKS) for unit in units}


def unit_of(path: Path) -> str:
    """The layer unit of a source file: its package under botctl/, or its module name."""
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported_units(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module == "botctl":
            names = [f"botctl.{a.name}" for a in node.names]  # from botctl import contract
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "botctl":
                unit = parts[1] if len(parts) > 1 else "__init__"
                found.add("__init__" if unit == "__version__" else unit)
    return found


def test_every_unit_has_a_rank() -> None:
    units = {unit_of(path) for path in SRC.rglob("*.py")}
    assert units - set(RANK) == set(), "add new packages to RANKS and to ARCHITECTURE.md"


def bad_edges(path: Path, unit: str) -> list[str]:
    found = []
    for imported in sorted(imported_units(path) - {unit}):
        if RANK[imported] <= RANK[unit]:
            where = "up" if RANK[imported] < RANK[unit] else "across"
            found.append(f"{unit}/{path.name} imports botctl.{imported} ({where})")
    return found


def test_imports_point_down() -> None:
    violations = [
        edge for path in sorted(SRC.rglob("*.py")) for edge in bad_edges(path, unit_of(path))
    ]
    assert not violations, "imports against the layers:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    ("unit", "source", "expected"),
    [
        ("store", "from botctl.reconcile.diff import compute_plan", ["(up)"]),
        ("service", "def f():\n    from botctl.store import state", ["(across)"]),
        ("reconcile", "from botctl.store.state import load_state", []),
    ],
)
def test_the_rule_catches_edges_up_and_across(
    tmp_path: Path, unit: str, source: str, expected: list[str]
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source + "\n")
    assert [edge.rsplit(" ", 1)[1] for edge in bad_edges(probe, unit)] == expected


def test_sandbox_and_client_share_no_code() -> None:
    for path in (SRC / "sandbox").rglob("*.py"):
        assert imported_units(path) <= {"sandbox", "contract"}, path
    for path in (SRC / "service").rglob("*.py"):
        if path.name != "embedded.py":  # the in-process transport is the one way in
            assert "sandbox" not in imported_units(path), path


def test_only_the_detail_view_imports_deepdiff() -> None:
    users = [
        p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if "deepdiff" in p.read_text()
    ]
    assert users == ["reconcile/detail.py"]


# Modules a command must not load: the HTTP stack where nothing is sent, another command's
# machinery (the agent's loop and listener, apply's executor and lock), httpx's own
# command-line client (pygments, rich), and what only a saved plan, an export or a rollback use.
NOT_FOR_A_PLAN = (
    "botctl.cli.agent",
    "botctl.agent",
    "botctl.cli.apply",
    "pygments",
    "rich",
    "uvicorn",
    "botctl.store.lock",
    "botctl.store.planfile",
    "botctl.reconcile.rollback",
    "botctl.config.export",
    "botctl.config.revision",
    "botctl.config.gitref",
)
# (argv, modules it must not load, modules that show it ran as far as it should)
LIGHT_COMMANDS = [
    (["--help"], ("httpx", "deepdiff", "pydantic", "yaml"), ("botctl.cli.plan",)),
    (
        ["plan", "--help"],
        ("asyncio", "httpx", "pydantic", "yaml", *NOT_FOR_A_PLAN),
        ("botctl.cli.plan",),
    ),
    (
        ["validate", "examples"],
        ("httpx", "deepdiff", "asyncio", *NOT_FOR_A_PLAN),
        ("botctl.config.resolve",),
    ),
    (["plan", "--no-reads", "examples"], NOT_FOR_A_PLAN, ("httpx", "botctl.render.text")),
]


def loaded_modules(argv: list[str], cwd: Path) -> set[str]:
    """The modules a botctl command loads, run in a process of its own."""
    probe = (
        "import json, sys\n"
        "from botctl.cli import cli\n"
        f"try:\n    cli.main({argv!r}, standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "print('\\n' + json.dumps(sorted(m for m, v in sys.modules.items() if v is not None)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "NO_COLOR": "1", **{f"{k}_BOT_KEY": "k" for k in ("SUPPORT", "SALES")}},
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(("argv", "absent", "present"), LIGHT_COMMANDS)
def test_a_command_loads_only_what_it_uses(
    argv: list[str], absent: tuple[str, ...], present: tuple[str, ...], tmp_path: Path
) -> None:
    """What each command loads (their start-up time is benchmarked in bench/bench_startup.py;
    this pins what makes it): a module or any of its submodules counts."""
    if argv[0] == "plan" and "--help" not in argv:
        argv = [
            *argv,
            "--state",
            str(tmp_path / "state.json"),
            "--api-url",
            "http://127.0.0.1:9/api/v1",
        ]
    loaded = loaded_modules(argv, SRC.parents[1])
    assert set(present) <= loaded
    found = sorted(m for m in loaded if any(m == a or m.startswith(f"{a}.") for a in absent))
    assert found == []


def test_the_probe_sees_what_a_command_loads() -> None:
    loaded = loaded_modules(["agent", "--help"], SRC.parents[1])
    assert "botctl.cli.agent" in loaded
    assert "asyncio" in loaded


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The botctl modules ``path`` imports (inside functions too): ``from a import b`` names
    ``a.b`` when that is a module, else ``a``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & known


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = stack[stack.index(node) :]
                del stack[stack.index(node) :]
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_module_imports_itself_through_others() -> None:
    """Within a package as across: modules that import each other (resources.attributes and
    resources.renames did) share what they need through a third module instead."""
    paths = {module_name(path): path for path in SRC.rglob("*.py")}
    graph = {name: imported_modules(path, set(paths)) - {name} for name, path in paths.items()}
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
