"""botctl installed like a tool: the wheel `uv build` makes, installed into a fresh virtual
environment, runs `botctl --version` and `botctl demo` from a directory that is not botctl's
checkout (the examples ship inside the package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import botctl

ROOT = Path(__file__).parents[1]


def uv(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("uv")
    assert executable is not None, "uv is needed to build and install botctl (see .ci/run)"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(
        [executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `uv build` makes: from the source distribution, as an installer would."""
    out = tmp_path_factory.mktemp("dist")
    uv("build", "--quiet", "--out-dir", str(out))
    (found,) = out.glob("botctl-*.whl")
    return found


def test_the_wheel_carries_the_examples_as_they_are_in_the_repository(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        packaged = {
            name.removeprefix("botctl/examples/"): archive.read(name)
            for name in archive.namelist()
            if name.startswith("botctl/examples/")
        }
    examples = ROOT / "examples"
    in_repository = {
        p.relative_to(examples).as_posix(): p.read_bytes() for p in examples.rglob("*.yaml")
    }
    assert in_repository
    assert packaged == in_repository


def test_installed_wheel_runs_from_any_directory(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    uv("venv", "--quiet", str(venv))
    python = venv / "bin" / "python"
    uv("pip", "install", "--quiet", "--python", str(python), str(wheel))
    elsewhere = tmp_path / "config-repo"
    elsewhere.mkdir()
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}

    def botctl_(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "botctl"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    version = botctl_("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout == f"botctl, version {botctl.__version__}\n"
    metadata = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('botctl'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert metadata.stdout.strip() == botctl.__version__

    demo = botctl_("demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "support (demo-support-01)" in demo.stdout
    assert "Drift detected" in demo.stdout
    assert "Behaviour against tier=production: 2 of 5 answer(s) changed" in demo.stdout
    # It ran the examples inside the installed package, not a checkout's.
    assert str(venv) in demo.stdout
    assert str(ROOT) not in demo.stdout
    assert list(elsewhere.iterdir()) == []  # and left the directory it ran in alone

    # `botctl init --ci` copies the workflow the wheel carries, as docs/ci has it.
    init = botctl_("init", "scaffolded", "--ci", "gitlab")
    assert init.returncode == 0, init.stdout + init.stderr
    written = (elsewhere / "scaffolded" / ".gitlab-ci.yml").read_bytes()
    assert written == (ROOT / "docs" / "ci" / "gitlab-ci.yml").read_bytes()
