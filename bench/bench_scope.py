"""Benchmark (not a test): work proportional to the change, under the service's rate limit.

    uv run python bench/bench_scope.py                 # 500 chatbots x 20 attributes, 10/s
    uv run python bench/bench_scope.py --bots 60 --apply-bots 20
    uv run python bench/bench_scope.py --no-headers    # 429s with Retry-After only

A fleet of ``--bots`` chatbots of 20 attributes each (an AttributeSet every chatbot includes
through a Defaults document), over four API keys: all but three on the first, one on each of
the others; ``--pilot`` of them labelled ``cohort: pilot`` under a Defaults of their own. It is
applied once against an unlimited sandbox (the baseline, recorded in the state) and committed
in a git repository; then the sandbox is served again, from the same database, with its rate
limit (``--rate`` requests per second per key, on the attribute operations, as the service's
v2 documents 100 per 10 s). Each run is the real CLI, a process of its own, timed from start
to exit; the requests are counted in the sandbox's log:

1. a pull request that changes one chatbot: ``plan --changed-since HEAD~1`` and the full plan,
   then its merge applied with ``--changed-since HEAD~1``;
2. one that changes the pilot Defaults: ``plan --changed-since HEAD~1``;
3. a full apply of ``--apply-bots`` chatbots, each with one attribute to update: the share
   of the limit it sustains (rate-limited requests per second over the limit).
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.server import run_in_thread

KEYS = {"BOTCTL_API_KEY": "bench-main", "KEY_B": "bench-b", "KEY_C": "bench-c", "KEY_D": "bench-d"}
ATTRIBUTES = [
    {"name": f"attr_{n:02d}", "type": "text", "label": f"Attribute {n}"} for n in range(20)
]


def document(
    kind: str, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "botctl/v1", "kind": kind, "metadata": metadata, "spec": spec}


def key_of(i: int, bots: int) -> str:
    """The first API key's variable for all but the last three chatbots."""
    return list(KEYS)[max(0, i - (bots - 4))] if i > bots - 4 else "BOTCTL_API_KEY"


def write_config(root: Path, bots: int, pilot: int, temp: float = 0.3, label: str = "") -> None:
    (root / "bots").mkdir(parents=True, exist_ok=True)
    for i in range(bots):
        spec: dict[str, Any] = {
            "chatbotId": f"bench-{i:04d}",
            "settings": {"name": f"Assistant {i}", "instructions": f"You are assistant {i}."},
        }
        if key_of(i, bots) != "BOTCTL_API_KEY":
            spec["apiKeyEnv"] = key_of(i, bots)
        labels = {"cohort": "pilot"} if i < pilot else {"cohort": "main"}
        doc = document("Chatbot", f"bot-{i:04d}", spec, labels)
        (root / "bots" / f"bot-{i:04d}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    attributes = [dict(ATTRIBUTES[0], label=ATTRIBUTES[0]["label"] + label), *ATTRIBUTES[1:]]
    shared = [
        document("AttributeSet", "crm", {"customAttributes": attributes}),
        document(
            "Defaults",
            "everyone",
            {
                "selector": {},
                "settings": {"model": "gpt-5-mini", "temp": 0.3},
                "attributeSets": ["crm"],
            },
        ),
        document(
            "Defaults",
            "pilot",
            {"selector": {"matchLabels": {"cohort": "pilot"}}, "settings": {"temp": temp}},
        ),
    ]
    (root / "shared.yaml").write_text(yaml.safe_dump_all(shared, sort_keys=False))


def git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.org",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.org",
    }
    subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def botctl(api_url: str, root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run botctl in a process of its own; the wall seconds from start to exit. Bytecode is
    allowed (this VM sets PYTHONDONTWRITEBYTECODE, which recompiles every module at every
    start; see bench_startup.py)."""
    env = {**os.environ, **KEYS, "BOTCTL_API_URL": api_url, "NO_COLOR": "1"}
    env.pop("BOTCTL_CHANGED_SINCE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-m", "botctl", *args, "--state", str(root / "state.json")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    LAST_CPU[0] = cpu
    return seconds, done


LAST_CPU = [0.0]  # CPU seconds of the last botctl process


class Log:
    def __init__(self, url: str) -> None:
        self.url = url

    def clear(self) -> None:
        httpx.delete(f"{self.url}/_sandbox/requests", timeout=30)

    def entries(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/_sandbox/requests", timeout=30).json()
        return list(answer["requests"])


def measure(name: str, url: str, api_url: str, root: Path, *args: str) -> dict[str, Any]:
    log = Log(url)
    log.clear()
    seconds, done = botctl(api_url, root, *args)
    entries = log.entries()
    reads = sum(1 for e in entries if e["method"] == "GET")
    refused = sum(1 for e in entries if e["status"] == 429)
    limited = sum(1 for e in entries if "/custom-attributes" in e["path"])
    ok = done.returncode in (0, 2)
    print(
        f"  {name}: {len(entries)} requests ({reads} reads), {refused} answered 429, "
        f"{seconds:.2f} s ({LAST_CPU[0]:.2f} s CPU), exit {done.returncode}"
        f"{'' if ok else ' FAILED'}"
    )
    if not ok:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    for line in done.stderr.splitlines():
        if line.startswith("Requests:"):
            print(f"    botctl said: {line}")
    return {
        "seconds": seconds,
        "requests": len(entries),
        "reads": reads,
        "refused": refused,
        "limited": limited,
    }


def seed(url: str, bots: int) -> None:
    with httpx.Client(base_url=f"{url}/_sandbox", timeout=60) as admin:
        for env, key in KEYS.items():
            if env != "BOTCTL_API_KEY":
                admin.post("/accounts", json={"key": key, "plan": "unlimited"})
        for i in range(bots):
            account = KEYS[key_of(i, bots)]
            body = {"id": f"bench-{i:04d}", "account": account, "attributes": ATTRIBUTES}
            answer = admin.post("/chatbots", json=body)
            answer.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=500)
    parser.add_argument("--pilot", type=int, default=40)
    parser.add_argument("--apply-bots", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--no-headers", action="store_true")
    args = parser.parse_args()
    package = importlib.import_module("botctl")
    compileall.compile_dir(Path(package.__file__ or ".").parent, quiet=1, workers=0)
    with tempfile.TemporaryDirectory(prefix="botctl-bench-scope-") as tmp:
        root, db = Path(tmp) / "config", str(Path(tmp) / "sandbox.db")
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        (root / ".gitignore").write_text("state.json\n")
        write_config(root, args.bots, args.pilot)
        keys = dict.fromkeys(KEYS.values(), "unlimited")
        print(f"{args.bots} chatbots x {len(ATTRIBUTES)} attributes over {len(KEYS)} keys")
        with run_in_thread(SandboxConfig(db=db, api_keys=keys)) as free:
            seed(free.url, args.bots)
            seconds, done = botctl(
                free.api_url, root, "apply", "--auto-approve", "bots", "shared.yaml"
            )
            assert done.returncode == 0, done.stderr
            print(f"  baseline apply, unlimited: {seconds:.1f} s")
        commit(root, "base")
        config = SandboxConfig(
            db=db, api_keys=keys, rate_limit=args.rate, rate_limit_headers=not args.no_headers
        )
        window = "announced" if not args.no_headers else "not announced (Retry-After only)"
        print(f"sandbox rate limit: {args.rate:g} requests/s per key, window {window}")
        with run_in_thread(config) as limited:
            paths = ("bots", "shared.yaml")
            # A chatbot of the first key outside the pilot cohort.
            n = args.bots // 2
            one = root / "bots" / f"bot-{n:04d}.yaml"
            before = f"You are assistant {n}."
            one.write_text(one.read_text().replace(before, "You help."))
            commit(root, "one chatbot")
            print("a pull request that changes one chatbot:")
            measure(
                "scoped plan",
                limited.url,
                limited.api_url,
                root,
                "plan",
                *paths,
                "--changed-since",
                "HEAD~1",
            )
            measure("full plan  ", limited.url, limited.api_url, root, "plan", *paths)
            measure(
                "scoped apply", limited.url, limited.api_url, root, "apply", *paths,
                "--changed-since", "HEAD~1", "--auto-approve",
            )  # fmt: skip
            write_config(root, args.bots, args.pilot, temp=0.7)
            one.write_text(one.read_text().replace(before, "You help."))
            commit(root, "pilot defaults")
            print(f"a pull request that changes the Defaults of {args.pilot} chatbots:")
            measure(
                "scoped plan",
                limited.url,
                limited.api_url,
                root,
                "plan",
                *paths,
                "--changed-since",
                "HEAD~1",
            )
            print(f"a full apply of {args.apply_bots} chatbots, one attribute update each:")
            write_config(root, args.bots, args.pilot, temp=0.7, label=" (v2)")
            one.write_text(one.read_text().replace(before, "You help."))
            chosen = [f"--target=bot-{i:04d}" for i in range(args.apply_bots)]
            result = measure(
                "apply",
                limited.url,
                limited.api_url,
                root,
                "apply",
                *paths,
                "--auto-approve",
                *chosen,
            )
            # Each attribute update reads the list first: (reads + updates) of rate-limited
            # operations, against what the limit allows in the same time.
            share = result["limited"] / (result["seconds"] * args.rate)
            print(f"    {result['limited']} rate-limited requests: {share:.0%} of the limit")


if __name__ == "__main__":
    main()
