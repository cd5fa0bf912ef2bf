"""Benchmark (not a test): what AttributeSets and Defaults cost at load time.

    uv run python bench/bench_fleet.py                  # 500 chatbots, 3 sets, 5 defaults
    uv run python bench/bench_fleet.py --bots 100 --runs 3

Writes the same fleet twice: once with 3 AttributeSets and 5 Defaults documents (each chatbot
declares only its name, instructions, labels and, for some, an own value), and once fully
expanded (one self-contained Chatbot document per chatbot, as ``botctl render`` resolves it).
Checks that both load to the same chatbots, then times loading and resolving each, the way
every command does (``pipeline.workspace.load``: parse, interpolate, resolve, validate, with the
cycle collector paused). Prints the median of --runs (alternating, so drift on a shared machine
hits both) and the ratio; the target is <= 1.2x.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from botctl.config.annotate import resolved_json
from botctl.config.loader import load_fleet
from botctl.pipeline.workspace import Workspace, load

SETS: dict[str, list[dict[str, Any]]] = {
    "crm-core": [
        {"name": "plan_tier", "type": "text", "label": "Plan tier", "description": "Billing plan"},
        {"name": "seats", "type": "number", "label": "Seats"},
        {"name": "churn_risk", "type": "boolean", "label": "Churn risk"},
        {"name": "renewal_date", "type": "date", "label": "Renewal date"},
    ],
    "billing": [
        {"name": "invoice_due", "type": "date", "label": "Invoice due"},
        {"name": "payment_method", "type": "text", "label": "Payment method"},
        {"name": "vat_id", "type": "text", "label": "VAT id"},
    ],
    "marketing": [
        {"name": "newsletter", "type": "boolean", "label": "Newsletter"},
        {"name": "lead_source", "type": "text", "label": "Lead source"},
        {"name": "campaign", "type": "text", "label": "Campaign"},
    ],
}
DEFAULTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "all",
        {},
        {
            "settings": {
                "model": "gpt-5-mini",
                "temp": 0.3,
                "visibility": "public",
                "ipLimit": 40,
                "ipLimitTimeframe": 3600,
                "ipLimitMessage": "Please try again in an hour.",
                "styles": {"theme": "dark", "buttonColor": "#0a84ff", "alignChatButton": "right"},
            },
            "attributeSets": ["crm-core"],
        },
    ),
    (
        "eu",
        {"matchLabels": {"region": "eu"}},
        {
            "settings": {
                "domains": ["eu.example", "help.eu.example"],
                "collectCustomerInformation": {
                    "title": "Can we reach you?",
                    "email": {"active": True, "label": "E-mail"},
                    "name": {"active": True, "label": "Name"},
                },
            },
            "attributeSets": ["billing"],
        },
    ),
    (
        "support",
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["support"]}]},
        {"settings": {"temp": 0.1, "suggestedMessages": ["Reset my password", "Invoices"]}},
    ),
    (
        "sales",
        {"matchLabels": {"team": "sales"}},
        {"settings": {"model": "claude-sonnet-4-6"}, "attributeSets": ["marketing"], "prune": True},
    ),
    (
        "not-legacy",
        {"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]},
        {"safety": {"maxArchivePercent": 40}},
    ),
]


def document(
    kind: str, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "botctl/v1", "kind": kind, "metadata": metadata, "spec": spec}


def chatbot(i: int) -> dict[str, Any]:
    labels = {"region": ("eu", "us", "apac")[i % 3], "team": ("support", "sales")[i % 2]}
    if i % 17 == 0:
        labels["legacy"] = "true"
    settings: dict[str, Any] = {
        "name": f"Assistant {i}",
        "instructions": f"You are assistant {i} of ${{COMPANY:-Acme}}.\nBe brief.\n",
    }
    if i % 5 == 0:
        settings["styles"] = {"buttonColor": "#16a34a"}
    spec: dict[str, Any] = {"chatbotId": f"bench-{i:04d}", "settings": settings}
    if i % 7 == 0:
        spec["customAttributes"] = [{"name": f"own_{i}", "type": "text", "label": "Own"}]
    return document("Chatbot", f"bot-{i:04d}", spec, labels)


def write_fleet(directory: Path, bots: int) -> None:
    (directory / "bots").mkdir(parents=True)
    for i in range(bots):
        text = yaml.safe_dump(chatbot(i), sort_keys=False)
        (directory / "bots" / f"bot-{i:04d}.yaml").write_text(text)
    sets = [document("AttributeSet", n, {"customAttributes": a}) for n, a in SETS.items()]
    (directory / "sets.yaml").write_text(yaml.safe_dump_all(sets, sort_keys=False))
    defaults = [document("Defaults", n, {"selector": s, **g}) for n, s, g in DEFAULTS]
    (directory / "defaults.yaml").write_text(yaml.safe_dump_all(defaults, sort_keys=False))


def write_expanded(fleet_dir: Path, directory: Path) -> None:
    """The same chatbots, each one self-contained, as botctl resolves them."""
    directory.mkdir()
    resolved = load_fleet([fleet_dir], environ={})
    for entry in resolved_json(resolved.bots, ())["chatbots"]:
        assert isinstance(entry, dict)
        text = yaml.safe_dump(entry["document"], sort_keys=False, allow_unicode=True)
        (directory / f"{entry['name']}.yaml").write_text(text)


def seconds(ws: Workspace) -> float:
    started = time.perf_counter()
    load(ws)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=500)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="botctl-bench-fleet-") as tmp:
        fleet_dir, expanded_dir = Path(tmp) / "fleet", Path(tmp) / "expanded"
        write_fleet(fleet_dir, args.bots)
        write_expanded(fleet_dir, expanded_dir)
        fleet_ws = Workspace(paths=[fleet_dir], environ={})
        expanded_ws = Workspace(paths=[expanded_dir], environ={})
        fleet_bots, expanded_bots = load(fleet_ws).bots, load(expanded_ws).bots
        strip = {"source"}
        assert [b.model_dump(exclude=strip) for b in fleet_bots] == [
            b.model_dump(exclude=strip) for b in expanded_bots
        ], "the two configurations must describe the same chatbots"
        fleet_times, expanded_times = [], []
        for _ in range(args.runs):
            expanded_times.append(seconds(expanded_ws))
            fleet_times.append(seconds(fleet_ws))
        size = sum(p.stat().st_size for p in fleet_dir.rglob("*.yaml"))
        expanded_size = sum(p.stat().st_size for p in expanded_dir.rglob("*.yaml"))
    fleet_s, expanded_s = statistics.median(fleet_times), statistics.median(expanded_times)
    attributes = sum(len(b.attributes) for b in fleet_bots)
    print(
        f"{args.bots} chatbots ({attributes} attributes after resolution), "
        f"{len(SETS)} sets, {len(DEFAULTS)} defaults; median of {args.runs} runs"
    )
    print(
        f"  expanded: {expanded_s:.3f} s ({min(expanded_times):.3f}-{max(expanded_times):.3f}), "
        f"{expanded_size / 1024:.0f} KiB of YAML"
    )
    print(
        f"  fleet:    {fleet_s:.3f} s ({min(fleet_times):.3f}-{max(fleet_times):.3f}), "
        f"{size / 1024:.0f} KiB of YAML"
    )
    print(f"  fleet / expanded: {fleet_s / expanded_s:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
