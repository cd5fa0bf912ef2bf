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
from botctl.config.yamlnodes import MAX_FILE_BYTES, parse_documents

MAX_FILES = 1000


def declared_names(paths: Sequence[Path]) -> list[str]:
    """Sorted, unique names of the Chatbot documents under ``paths`` (files or directories)."""
    names: set[str] = set()
    for index, file in enumerate(_yaml_files(paths)):
        if index >= MAX_FILES:
            break
        if not file.is_file():  # a FIFO would block the Tab press
            continue
        try:
            with file.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(data) > MAX_FILE_BYTES:
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
