"""docs/deploy works as written:

- the Kubernetes manifests build offline with ``kubectl kustomize`` and every object of the
  output is valid against Kubernetes' own JSON schemas (``kubernetes-validate``, which ships
  them: no network), strictly (an unknown field is an error), for the oldest and the newest
  version it knows; and they say what the README promises (probes, the Secret's variables,
  the webhook alone exposed);
- the systemd unit passes ``systemd-analyze verify`` and matches the documented install;
- the Dockerfile (no Docker engine here: its text is checked) installs from ``uv.lock``
  frozen, compiles bytecode, runs as a non-root user, and ``.dockerignore`` keeps
  everything but the sources out of the build context;
- every ``botctl agent`` command line in them parses as ``botctl agent`` parses it.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from botctl.agent.source import TOKEN_VARIABLE
from botctl.cli import cli
from botctl.defaults import DEFAULT_API_KEY_ENV, STATE_KEY_ENV
from tests import launch
from tests.tools import need

ROOT = Path(__file__).parents[1]
DEPLOY = ROOT / "docs" / "deploy"
UNIT = DEPLOY / "systemd" / "botctl-agent.service"


def agent_params(args: list[str]) -> dict[str, Any]:
    """``args`` parsed by ``botctl agent`` itself (an unknown option, a bad value: an error)."""
    command = cli.get_command(click.Context(cli), "agent")
    assert command is not None
    try:
        return dict(command.make_context("agent", list(args)).params)
    except click.UsageError as exc:
        raise AssertionError(f"botctl agent {shlex.join(args)}: {exc.format_message()}") from exc


def variables_read(params: dict[str, Any]) -> set[str]:
    """The secrets an agent started with ``params`` reads from its environment."""
    return {
        DEFAULT_API_KEY_ENV,
        params["webhook_secret_env"],
        TOKEN_VARIABLE,
        STATE_KEY_ENV,
        params["control_token_env"],
    }


# --- Kubernetes ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> dict[tuple[str, str], dict[str, Any]]:
    kubectl = need("kubectl", install="apt-get install -y kubernetes-client")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "kubernetes")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    docs = [doc for doc in yaml.safe_load_all(out) if doc]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.mark.parametrize("version", ["1.25.0", "latest"])
def test_every_object_kustomize_builds_is_valid_against_the_kubernetes_schemas(
    built: dict[tuple[str, str], dict[str, Any]], version: str
) -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    wanted = latest_version() if version == "latest" else version
    for key, doc in built.items():
        try:
            kubernetes_validate.validate(doc, wanted, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{key} against Kubernetes {wanted}: {exc.message}") from exc
    assert set(built) == {
        ("Namespace", "botctl"),
        ("Secret", "botctl-agent"),
        ("Deployment", "botctl-agent"),
        ("Service", "botctl-agent"),
        ("Ingress", "botctl-agent-hooks"),
        ("PodDisruptionBudget", "botctl-agent"),
        ("NetworkPolicy", "botctl-agent"),
    }


def test_the_schemas_catch_a_mistake(built: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The validation above can fail: a misspelt field is refused."""
    import kubernetes_validate

    deployment = built["Deployment", "botctl-agent"]
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.25.0", strict=True)


def test_the_deployment_runs_two_ready_replicas_on_a_shared_state_with_both_probes(
    built: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = built["Deployment", "botctl-agent"]
    spec = deployment["spec"]
    pod = spec["template"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    (container,) = pod["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["envFrom"] == [{"secretRef": {"name": "botctl-agent"}}]
    params = agent_params(container["args"])
    # A shared state: the lease only works where both replicas see the same state.
    assert str(params["state_path"]).startswith(("s3://", "git+"))
    assert params["listen"] == ("0.0.0.0", 9464)
    # Longer than the drain, the notifications' 5 s and the listener's 5 s.
    assert pod["spec"]["terminationGracePeriodSeconds"] >= params["drain_timeout"] + 10
    # No key on a command line.
    assert not any(re.search(r"KEY|TOKEN|SECRET", a) and "-env" not in a for a in container["args"])
    budget = built["PodDisruptionBudget", "botctl-agent"]["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"] == spec["selector"]


def test_the_secret_carries_every_variable_the_agent_reads(
    built: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = built["Deployment", "botctl-agent"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    params = agent_params(container["args"])
    secret = built["Secret", "botctl-agent"]
    assert secret["type"] == "Opaque"
    wanted = variables_read(params)
    assert wanted <= set(secret["stringData"]), wanted - set(secret["stringData"])


def test_the_ingress_exposes_the_webhook_alone_on_an_allowed_host(
    built: dict[tuple[str, str], dict[str, Any]],
) -> None:
    ingress = built["Ingress", "botctl-agent-hooks"]["spec"]
    (rule,) = ingress["rules"]
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/hooks/git", "Exact")
    service = built["Service", "botctl-agent"]
    assert path["backend"]["service"]["name"] == service["metadata"]["name"]
    deployment = built["Deployment", "botctl-agent"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert rule["host"] in agent_params(container["args"])["allowed_hosts"]
    annotations = built["Ingress", "botctl-agent-hooks"]["metadata"]["annotations"]
    assert "http_503" in annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"]
    policy = built["NetworkPolicy", "botctl-agent"]["spec"]
    assert policy["podSelector"] == deployment["spec"]["selector"]


# --- systemd ------------------------------------------------------------------------------


def unit_entries(text: str) -> dict[str, list[str]]:
    """A unit file's settings (continuation lines joined), each key with its values."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found: dict[str, list[str]] = {}
    for line in joined.splitlines():
        if line.strip() and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_the_unit_matches_the_documented_install() -> None:
    unit = unit_entries(UNIT.read_text())
    readme = (ROOT / "README.md").read_text()
    (exec_start,) = unit["ExecStart"]
    binary, subcommand, *args = shlex.split(exec_start)
    assert (binary, subcommand) == ("/opt/botctl/bin/botctl", "agent")
    install = "UV_PROJECT_ENVIRONMENT=/opt/botctl"
    assert install in readme
    assert "uv sync --frozen --no-dev --extra s3 --no-editable" in readme
    assert unit["User"] == ["botctl"]
    assert re.search(r"useradd --system .*botctl", readme)
    (env_file,) = unit["EnvironmentFile"]
    assert f"docs/deploy/systemd/agent.env {env_file}" in readme
    params = agent_params(args)
    assert params["state_path"] is not None
    assert str(params["cache_dir"]).startswith("/var/lib/botctl")  # StateDirectory: writable
    assert unit["StateDirectory"] == ["botctl"]
    assert int(unit["TimeoutStopSec"][0]) >= params["drain_timeout"] + 10
    # Every secret the agent reads, in the EnvironmentFile's example.
    env = (DEPLOY / "systemd" / "agent.env").read_text()
    defined = set(re.findall(r"^([A-Z_]+)=", env, re.MULTILINE))
    wanted = variables_read(params)
    assert wanted <= defined, wanted - defined


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """Verified in a root of its own: systemd's units (the unit needs network-online.target
    and multi-user.target) and an executable where the install puts botctl."""
    analyze = need("systemd-analyze", install="apt-get install -y systemd")
    system_units = Path("/usr/lib/systemd/system")
    if not system_units.is_dir():
        system_units = Path("/lib/systemd/system")
    shutil.copytree(system_units, tmp_path / "usr/lib/systemd/system", symlinks=True)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, tmp_path / "etc/systemd/system" / UNIT.name)
    botctl = tmp_path / "opt/botctl/bin/botctl"
    botctl.parent.mkdir(parents=True)
    botctl.write_text(f'#!/bin/sh\nexec {shlex.quote(str(launch.entry_point()))} "$@"\n')
    botctl.chmod(0o755)
    done = subprocess.run(
        [analyze, "verify", f"--root={tmp_path}", UNIT.name],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""  # no warning either (an unknown or misspelt setting)


# --- the image ----------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions (continuations joined, comments dropped)."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_image_installs_from_the_lock_frozen_with_bytecode_as_a_non_root_user() -> None:
    steps = instructions((DEPLOY / "Dockerfile").read_text())
    stages = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    assert len(stages) == 2  # a build stage; the image has no uv, no compiler, no sources
    runs = [rest for word, rest in steps if word == "RUN"]
    syncs = [r for r in runs if "uv sync" in r]
    assert syncs
    assert all("--frozen" in r and "--no-dev" in r for r in syncs)
    assert not any(re.search(r"pip install (?!--no-cache-dir uv==)", r) for r in runs)
    copied_lock = next(i for i, (w, r) in enumerate(steps) if w == "COPY" and "uv.lock" in r)
    assert copied_lock < next(i for i, (w, r) in enumerate(steps) if "uv sync" in r)
    env = " ".join(rest for word, rest in steps if word == "ENV")
    assert "UV_COMPILE_BYTECODE=1" in env
    final = steps[stages[-1] :]
    (user,) = [rest for word, rest in final if word == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0
    assert any(f"--uid {uid}" in rest for word, rest in final if word == "RUN")
    assert ("ENTRYPOINT", '["botctl", "agent"]') in final
    assert any(w == "COPY" and r.startswith("--from=") for w, r in final)


def dockerignored(patterns: list[str], path: str) -> bool:
    """Whether Docker leaves ``path`` out of the build context: the last pattern matching
    it or one of its parent directories decides; ``!`` re-includes."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").strip("/")
        if glob.startswith("**/"):
            hits = any(fnmatch.fnmatchcase(p, glob[3:]) for p in parts)
        else:
            hits = any(
                fnmatch.fnmatchcase("/".join(parts[:n]), glob) for n in range(1, len(parts) + 1)
            )
        if hits:
            ignored = not negated
    return ignored


def test_the_build_context_holds_the_sources_and_nothing_else() -> None:
    text = (ROOT / ".dockerignore").read_text()
    patterns = [p.strip() for p in text.splitlines() if p.strip() and not p.startswith("#")]
    steps = instructions((DEPLOY / "Dockerfile").read_text())
    sources = [
        s
        for word, rest in steps
        if word == "COPY" and not rest.startswith("--from=")
        for s in rest.split()[:-1]
    ]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(patterns, source), f"{source} is left out of the context"
    assert not dockerignored(patterns, "src/botctl/agent/loop.py")
    for left_out in (
        ".venv/lib/python3.11/site-packages/x.py",
        ".git/HEAD",
        ".botctl/state.json.key",
        "examples/.botctl/state.json.key",
        "src/botctl/__pycache__/cli.cpython-311.pyc",
        "tests/test_deploy.py",
        "bench/run.py",
        "docs/deploy/Dockerfile",
    ):
        assert dockerignored(patterns, left_out), left_out


def test_the_documented_docker_run_parses() -> None:
    comments = [
        line.lstrip("#").strip()
        for line in (DEPLOY / "Dockerfile").read_text().splitlines()
        if line.startswith("#")
    ]
    start = next(i for i, line in enumerate(comments) if line.startswith("docker run "))
    command = comments[start]
    while command.endswith("\\"):
        start += 1
        command = command[:-1] + " " + comments[start]
    words = shlex.split(command)
    image = words.index("botctl-agent")
    assert agent_params(words[image + 1 :])["listen"] == (
        "0.0.0.0",
        9464,
    )
