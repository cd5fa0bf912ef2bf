"""docs/deploy: the Kubernetes manifests build offline with ``kubectl kustomize`` (when kubectl
is on the machine) into what the README promises, and every flag the manifests, the systemd
unit and the Dockerfile pass to ``botctl agent`` is one it has."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from botctl.cli import cli

DEPLOY = Path(__file__).parents[1] / "docs" / "deploy"


def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "kubernetes")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_kustomize_builds_a_deployment_of_two_replicas_with_probes_and_scraping() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in built()}
    deployment = docs["Deployment", "botctl-agent"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    (container,) = pod["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["envFrom"] == [{"secretRef": {"name": "botctl-agent"}}]
    assert docs["Secret", "botctl-agent"]["type"] == "Opaque"
    assert docs["Service", "botctl-agent"]["spec"]["ports"][0]["port"] == 9464
    args = container["args"]
    assert args[0].startswith("git+")
    # A shared state: the lease only works where both replicas see the same state.
    state = next(a for a in args if a.startswith("--state="))
    assert state.startswith(("--state=s3://", "--state=git+"))
    # No key on a command line.
    assert not any("KEY" in a and "=" in a and "env" not in a for a in args)


def agent_flags() -> set[str]:
    result = CliRunner().invoke(cli, ["agent", "--help"], terminal_width=200)
    assert result.exit_code == 0
    return set(re.findall(r"--[a-z][a-z-]+", result.output))


def test_every_flag_the_deployments_pass_is_one_botctl_agent_has() -> None:
    known = agent_flags()
    texts = [
        (DEPLOY / "kubernetes" / "deployment.yaml").read_text(),
        (DEPLOY / "systemd" / "botctl-agent.service").read_text(),
        (DEPLOY / "Dockerfile").read_text(),
    ]
    used = {flag for text in texts for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]+", text)}
    used -= {
        "--no-cache-dir",
        "--wheel-dir",
        "--no-index",
        "--find-links",
        "--no-install-recommends",
    }
    used -= {"--system", "--uid", "--create-home", "--home-dir", "--rm", "--from", "--now"}
    assert used
    assert used <= known, used - known


def test_the_dockerfile_runs_the_agent_as_a_non_root_user_on_a_slim_base() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:[\d.]+-slim$", text, re.MULTILINE)
    assert re.search(r"^USER 10001", text, re.MULTILINE)
    assert 'ENTRYPOINT ["botctl", "agent"]' in text
    unit = (DEPLOY / "systemd" / "botctl-agent.service").read_text()
    assert "ExecStart=/usr/local/bin/botctl agent " in unit
    assert "User=botctl" in unit
