"""The chatbot names (``metadata.name``) a configuration declares, for shell completion.

Tolerant where the loader is strict: a file that does not parse, a document that is not a
Chatbot or a name that is not a string is skipped, so configuration being edited still
completes. Never interpolates variables, never validates, never contacts the service. Hidden
directories (``.git``, ``.venv``, ``.botctl``) are not searched, and the search stops after
``MAX_FILES`` YAML files: a Tab press in a home directory must come back at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from botctl.config.loader import SUFFIXES
from botctl.config.yamlnodes import parse_documents

MAX_FILES = 1000


def declared_names(paths: Sequence[Path]) -> list[str]:
    """Sorted, unique names of the Chatbot documents under ``paths`` (files or directories)."""
    names: set[str] = set()
    for index, file in enumerate(_yaml_files(paths)):
        if index >= MAX_FILES:
            break
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        documents, _ = parse_documents(text, str(file))
        for doc in documents:
            name = _chatbot_name(doc.value)
            if name is not None:
                names.add(name)
    return sorted(names)


def _chatbot_name(value: object) -> str | None:
    if not isinstance(value, dict) or value.get("kind") != "Chatbot":
        return None
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else None


def _yaml_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(SUFFIXES):
                        yield Path(root) / name
