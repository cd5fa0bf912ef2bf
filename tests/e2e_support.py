"""A workbench for end-to-end tests: the real CLI against a sandbox served over loopback HTTP."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner, Result

from botctl.cli import cli

KEY = "test-key"  # the default sandbox fixture's account


@dataclass
class Bench:
    url: str  # sandbox root, e.g. http://127.0.0.1:PORT
    api_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(method, f"{self.url}/_sandbox{path}", json=body, timeout=10)
        assert response.status_code < 300, (path, response.status_code, response.text)
        return response.json() if response.content else None

    def create_bot(self, chatbot_id: str, account: str = KEY, **body: Any) -> None:
        self.admin("POST", "/chatbots", {"id": chatbot_id, "account": account, **body})

    def add_account(self, key: str, plan: str = "standard") -> None:
        self.admin("POST", "/accounts", {"key": key, "plan": plan})

    def requests(self) -> list[dict[str, Any]]:
        return list(self.admin("GET", "/requests")["requests"])

    def writes(self) -> list[dict[str, Any]]:
        return [r for r in self.requests() if r["method"] != "GET"]

    def clear_log(self) -> None:
        self.admin("DELETE", "/requests")

    def bot_state(self, chatbot_id: str) -> dict[str, Any]:
        world = self.admin("GET", "/state")
        bots = world["chatbots"]
        if isinstance(bots, dict):
            return dict(bots[chatbot_id])
        return next(b for b in bots if b["id"] == chatbot_id)

    def write(self, name: str, text: str) -> Path:
        path = self.workdir / "config" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    @property
    def config_dir(self) -> Path:
        return self.workdir / "config"

    def run(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        """Run botctl with the sandbox's URL and this bench's state file."""
        base = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": self.api_url, "NO_COLOR": "1"}
        full_env = {**base, **self.env, **(env or {})}
        argv = list(args)
        if argv and argv[0] in {"plan", "apply", "drift"}:
            argv[1:1] = ["--state", str(self.state_path)]
        return CliRunner().invoke(cli, argv, env=full_env, input=input, catch_exceptions=False)

    def plan_json(self, *paths: str) -> dict[str, Any]:
        result = self.run("plan", "--format", "json", *paths)
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.stdout))


def bot_yaml(
    name: str = "support",
    chatbot_id: str = "bot-1",
    settings: str = "name: Support Bot\nmodel: gpt-5-mini\ntemp: 0.2",
    attributes: str = "",
    extra: str = "",
) -> str:
    """One document of botctl's format; ``settings``/``attributes`` are YAML snippets."""
    doc = [
        "apiVersion: botctl/v1",
        "kind: Chatbot",
        "metadata:",
        f"  name: {name}",
        "spec:",
        f"  chatbotId: {chatbot_id}",
    ]
    if extra:
        doc += [f"  {line}" for line in extra.splitlines()]
    if settings:
        doc.append("  settings:")
        doc += [f"    {line}" for line in settings.splitlines()]
    if attributes:
        doc.append("  customAttributes:")
        doc += [f"    {line}" for line in attributes.splitlines()]
    return "\n".join(doc) + "\n"
