"""A production chatbot and its preview, as the behaviour tests configure them: labelled
alike but for ``stage``, each with its own instructions (the sandbox answers from them)."""

from __future__ import annotations

import json


def stages(production: str, preview: str, *more: str, model: str | None = None) -> str:
    """``support`` (bot-prod, stage production) and ``support-preview`` (bot-preview, stage
    preview), then the documents ``more``, as one YAML text."""
    extra = f", model: {model}" if model else ""
    docs = [
        f"apiVersion: botctl/v1\nkind: Chatbot\n"
        f"metadata: {{name: {name}, labels: {{app: support, stage: {stage}}}}}\n"
        f"spec: {{chatbotId: {chatbot_id}, "
        f"settings: {{instructions: {json.dumps(text)}{extra}}}}}\n"
        for name, stage, chatbot_id, text in (
            ("support", "production", "bot-prod", production),
            ("support-preview", "preview", "bot-preview", preview),
        )
    ]
    return "---\n".join([*docs, *more])
