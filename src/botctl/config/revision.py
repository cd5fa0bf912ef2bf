"""A chatbot's configuration revision: what ``botctl promote`` compares.

A digest (SHA-256, first 16 hex digits) of what the configuration asks of one chatbot once
resolved (each resource kind's ``revision_values``: its settings, attributes, prune and ignore
rules, Defaults and AttributeSets laid in) and of the conversation tests that cover it.
Whatever file layout, the same declared chatbot and tests give the same revision; any change to
them (a prompt, a test) gives another, while a change to another chatbot does not. The values
of ``${secret:...}`` are not part of it (a rotated secret is not a new revision, and the digest
cannot be used to guess one); the API key never is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from botctl.config.conversation import ConversationTest
from botctl.config.resolve import Fleet
from botctl.models import BotSpec
from botctl.resources.registry import kinds
from botctl.values import mask_secrets_in_text


def bot_revision(spec: BotSpec, tests: Iterable[ConversationTest]) -> str:
    declared = {
        "chatbotId": spec.chatbot_id,
        # Each kind's values, under keys kept stable: a revision of before reads the same.
        **{key: value for kind in kinds() for key, value in kind.revision_values(spec).items()},
        "tests": [
            {"name": t.name, "spec": t.spec.model_dump(mode="json", by_alias=True)}
            for t in sorted(tests, key=lambda t: t.name)
            if spec.name in t.chatbots
        ],
    }
    text = json.dumps(declared, sort_keys=True, ensure_ascii=False)
    text = mask_secrets_in_text(text, spec.secret_values)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def revisions(fleet: Fleet) -> dict[str, str]:
    """Each chatbot's revision, by chatbot id."""
    return {b.spec.chatbot_id: bot_revision(b.spec, fleet.tests) for b in fleet.bots}
