"""Imports point one way (ARCHITECTURE.md). A backwards edge fails here, naming it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "botctl"

# module -> botctl modules it may import. Anything not listed may import nothing of botctl.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "errors": set(),
    "models": {"contract", "errors"},
    "plan": {"models", "errors"},
    "state": {"plan", "models", "errors"},
    "masking": {"models"},
    "diff": {"models", "plan", "state", "errors", "masking"},
    "drift": {"diff", "models", "plan", "state", "errors", "masking"},
    "render": {"plan", "drift", "models"},
    "client": {"errors", "models", "contract", "retry", "pacing", "__init__"},
    "retry": {"errors"},
    "pacing": {"errors"},
    "live": {"client", "models", "errors", "contract"},
    "apply": {"plan", "errors", "client"},
    "spec": {"models", "errors", "contract", "spec"},
    "service": {"client", "contract", "errors", "models", "plan", "sandbox", "pacing"},
    "workflow": {
        "apply",
        "client",
        "spec",
        "diff",
        "drift",
        "errors",
        "live",
        "models",
        "plan",
        "service",
        "state",
    },
    "export": {"models"},
    "demo": {"apply", "models", "render", "service", "workflow"},
    "console": {"apply"},
}
ENTRY_POINTS = {"cli", "cli_more", "options", "__main__"}  # may import anything


def botctl_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "botctl" and len(parts) > 1:
                found.add(parts[1])
    return found


def module_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_imports_point_one_way() -> None:
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        module = module_of(path)
        if module in ENTRY_POINTS or module == "__init__":
            continue
        if module == "sandbox":
            allowed = {"sandbox", "contract"}  # shares nothing with the client side
        else:
            allowed = ALLOWED.get(module, set()) | {module}
        for imported in botctl_imports(path) - allowed - {"__init__"}:
            if imported in {"__version__"}:
                continue
            violations.append(f"{path.relative_to(SRC.parent)} imports botctl.{imported}")
    assert not violations, "backwards or unplanned imports:\n" + "\n".join(violations)


def test_sandbox_and_client_share_no_code() -> None:
    for path in (SRC / "sandbox").rglob("*.py"):
        assert botctl_imports(path) <= {"sandbox", "contract"}, path
    for name in ("client.py", "live.py"):
        assert "sandbox" not in botctl_imports(SRC / name)


def test_only_diff_imports_deepdiff() -> None:
    users = [p.name for p in SRC.rglob("*.py") if "deepdiff" in p.read_text()]
    assert users == ["diff.py"]
