"""YAML text -> plain Python values plus the line:column of every key and value.

PyYAML's composer keeps each node's position; constructing values directly (``safe_load``)
loses it. Walking the node tree ourselves keeps both, so every later problem can point at the
exact key or value it is about. Duplicate keys, which PyYAML silently lets win, are errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from botctl.errors import Problem

# libyaml's parser when PyYAML has it (it usually does): the same nodes and marks, much
# faster (see README, Benchmarks).
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR_TAG = "tag:yaml.org,2002:str"

Path = tuple[str | int, ...]
Mark = tuple[int, int]  # 1-based line, column
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class LocatedDocument:
    file: str
    value: Any
    start: Mark
    values: dict[Path, Mark] = field(default_factory=dict)  # where each value starts
    keys: dict[Path, Mark] = field(default_factory=dict)  # where each mapping key starts

    def mark(self, path: Path, *, key: bool = False) -> Mark:
        """The closest known position: the key or value itself, else its nearest parent."""
        index = self.keys if key else self.values
        while path:
            if path in index:
                return index[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.values.get((), self.start)

    def problem(
        self, path: Path, message: str, *, key: bool = False, warning: bool = False
    ) -> Problem:
        line, col = self.mark(path, key=key)
        return Problem(self.file, line, col, message, "warning" if warning else "error")


def _mark(node: yaml.Node) -> Mark:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


class _Walker:
    def __init__(self, doc: LocatedDocument, problems: list[Problem]) -> None:
        self.doc = doc
        self.problems = problems
        self.constructor = yaml.SafeLoader("")
        self.open: set[int] = set()  # collection nodes being walked: an alias to one recurses

    def value(self, node: yaml.Node, path: Path) -> Any:
        self.doc.values[path] = _mark(node)
        if isinstance(node, yaml.CollectionNode):
            if id(node) in self.open:
                line, col = _mark(node)
                self.problems.append(
                    Problem(self.doc.file, line, col, "invalid YAML: an alias refers to itself")
                )
                return None
            self.open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self.mapping(node, path)
                return [self.value(item, (*path, i)) for i, item in enumerate(node.value)]
            finally:
                self.open.discard(id(node))
        if node.tag == _STR_TAG:
            return node.value  # most scalars: skip the constructor's bookkeeping
        try:
            return self.constructor.construct_object(node, deep=True)
        except Exception as exc:  # any failure here is the value's fault
            # PyYAML raises plain ValueError, KeyError or AttributeError for scalars its resolver
            # or an explicit tag claimed but it cannot build: an impossible date (2024-02-30),
            # "!!int abc", "!!bool maybe", "!!timestamp nope".
            line, col = _mark(node)
            reason = getattr(exc, "problem", None) or str(exc) or type(exc).__name__
            if isinstance(exc, KeyError | AttributeError):
                reason = f"not a valid {node.tag.rsplit(':', 1)[-1]}"
            # Never a plain string here (those returned above): quoting makes it one.
            message = f"invalid value {node.value!r}: {reason} (quote it if it is meant as text)"
            self.problems.append(Problem(self.doc.file, line, col, message))
            return None

    def mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        written: set[str] = set()  # keys this mapping writes itself (not merged with "<<")
        for key_node, value_node, own in self._pairs(node):
            if key_node.tag == _STR_TAG and isinstance(key_node, yaml.ScalarNode):
                key = key_node.value  # nearly every key: a plain string, nothing to construct
            else:
                key = self.value(key_node, (*path, "<key>"))
            if not isinstance(key, str):
                line, col = _mark(key_node)
                self.problems.append(
                    Problem(self.doc.file, line, col, f"keys must be strings, got {key!r}")
                )
                continue
            child = (*path, key)
            if key in result and key not in written:
                self._forget(child)  # a merged value, overridden: later pairs win
                del result[key]
            if key in result:
                line, col = _mark(key_node)
                first = self.doc.keys[child]
                self.problems.append(
                    Problem(
                        self.doc.file,
                        line,
                        col,
                        f"duplicate key {key!r} (first at line {first[0]})",
                    )
                )
                continue
            if own:
                written.add(key)
            self.doc.keys[child] = _mark(key_node)
            result[key] = self.value(value_node, child)
        self.doc.values.pop((*path, "<key>"), None)
        return result

    def _pairs(self, node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node, bool]]:
        """The pairs of a mapping with "<<" merge keys resolved (without changing the node, which
        an alias may share), in the order where a later pair overrides an earlier one: merged
        pairs first (of a list of mappings, the first one wins), then the mapping's own pairs,
        each marked whether the mapping writes it itself."""
        merged: list[tuple[yaml.Node, yaml.Node, bool]] = []
        own: list[tuple[yaml.Node, yaml.Node, bool]] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node, True))
                continue
            sources = (
                value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            )
            for source in reversed(sources):
                line, col = _mark(source)
                if not isinstance(source, yaml.MappingNode):
                    message = "invalid YAML: '<<' merges a mapping or a list of mappings"
                    self.problems.append(Problem(self.doc.file, line, col, message))
                elif id(source) in self.open:
                    message = "invalid YAML: an alias refers to itself"
                    self.problems.append(Problem(self.doc.file, line, col, message))
                else:
                    self.open.add(id(source))
                    try:
                        merged += [(k, v, False) for k, v, _ in self._pairs(source)]
                    finally:
                        self.open.discard(id(source))
        return merged + own

    def _forget(self, path: Path) -> None:
        """Drop the positions recorded for ``path`` and everything below it."""
        for index in (self.doc.values, self.doc.keys):
            for known in [p for p in index if p[: len(path)] == path]:
                del index[known]


def parse_documents(text: str, file: str) -> tuple[list[LocatedDocument], list[Problem]]:
    """Every non-empty document of a YAML stream, located; YAML errors as located problems."""
    problems: list[Problem] = []
    documents: list[LocatedDocument] = []
    try:
        for node in yaml.compose_all(text, Loader=_LOADER):
            if node is None:
                continue
            doc = LocatedDocument(file=file, value=None, start=_mark(node))
            doc.value = _Walker(doc, problems).value(node, ())
            if doc.value is not None:
                documents.append(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = " ".join(filter(None, [exc.context, exc.problem]))
        problems.append(Problem(file, line, col, f"invalid YAML: {reason}"))
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, by offset
        before = text[: exc.position]
        line, col = before.count("\n") + 1, exc.position - before.rfind("\n")
        problems.append(
            Problem(file, line, col, f"invalid YAML: character #x{exc.character:04x}: {exc.reason}")
        )
    except yaml.YAMLError as exc:
        problems.append(Problem(file, 1, 1, f"invalid YAML: {exc}"))
    return documents, problems
