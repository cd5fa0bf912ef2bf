"""YAML text -> plain Python values plus the line:column of every key and value.

PyYAML's nodes keep each value's position; constructing values directly (``safe_load``)
loses it. Walking the node tree ourselves keeps both, so every later problem can point at the
exact key or value it is about. Duplicate keys, which PyYAML silently lets win, are errors.

Hostile input is bounded before it can cost much (README, Limits): nesting deeper than
``MAX_DEPTH`` levels, and aliases that would expand to more than ``MAX_ALIAS_NODES`` values
or ``MAX_ALIAS_CHARS`` characters (a 472-byte "billion laughs" document expands to 10^9), are
located errors. The nodes are composed here, from libyaml's events, in a loop rather than by
PyYAML's composers: libyaml's recurses in C once per level and overflows the C stack (a
segfault) on a document nested 100,000 levels deep; PyYAML's recurses in Python and raises
RecursionError. The loop knows the depth and what every alias expands to as it goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml import events
from yaml.resolver import Resolver

from botctl.errors import Problem

MAX_DEPTH = 100  # nested collections; a chatbot document needs 6
MAX_ALIAS_NODES = 10_000  # values built through aliases, per document
MAX_ALIAS_CHARS = 10_000_000  # characters of scalars built through aliases, per document
MAX_FILE_BYTES = 10 * 2**20  # of one configuration file (config.loader reads no more)


def _parser_class() -> type[Any]:
    """libyaml's parser when PyYAML has it (it usually does): the same events and marks, much
    faster (see README, Benchmarks); else PyYAML's own."""
    try:
        from yaml._yaml import CParser
    except ImportError:  # pragma: no cover - PyYAML built without libyaml
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class PyParser(Reader, Scanner, Parser, Resolver):
            def __init__(self, text: str) -> None:
                Reader.__init__(self, text)
                Scanner.__init__(self)
                Parser.__init__(self)
                Resolver.__init__(self)

        return PyParser

    class FastParser(CParser, Resolver):
        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            Resolver.__init__(self)

    return FastParser


_PARSER = _parser_class()

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
            if len(path) >= MAX_DEPTH:  # nested through aliases: each level was written once
                line, col = _mark(node)
                self.problems.append(Problem(self.doc.file, line, col, DEPTH_MESSAGE))
                return None
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


class LimitExceeded(yaml.MarkedYAMLError):
    """Input beyond botctl's bounds: valid YAML, refused."""


class _Open:
    """A collection being composed, and what its children weigh so far."""

    __slots__ = ("anchor", "chars", "key", "node", "values")

    def __init__(self, node: yaml.CollectionNode, anchor: str | None) -> None:
        self.node = node
        self.anchor = anchor
        self.key: yaml.Node | None = None  # a mapping's key waiting for its value
        self.values = 1  # what the collection builds: itself and its children
        self.chars = 0


def _compose_all(text: str) -> Iterator[yaml.Node]:
    """The root node of every document, as PyYAML's composer builds them (anchors, aliases,
    resolved tags, marks), in a loop; raises LimitExceeded beyond the bounds above and
    yaml.MarkedYAMLError for invalid YAML."""
    parser = _PARSER(text)
    get_event, resolve = parser.get_event, parser.resolve
    anchors: dict[str, yaml.Node] = {}
    # What each anchored value builds (values, characters), once complete: what an alias
    # to it costs. An alias to a collection still open (itself) is the walker's error.
    weights: dict[str, tuple[int, int]] = {}
    stack: list[_Open] = []
    via_aliases = [0, 0]
    root: yaml.Node | None = None
    while True:
        event = get_event()
        kind = type(event)
        node: yaml.Node
        if kind is events.ScalarEvent:
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolve(yaml.ScalarNode, event.value, event.implicit)
            node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
            weight = (1, len(event.value))
            _anchor(anchors, event, node)
            if event.anchor is not None:
                weights[event.anchor] = weight
        elif kind is events.SequenceStartEvent or kind is events.MappingStartEvent:
            if len(stack) >= MAX_DEPTH:
                raise LimitExceeded(None, None, DEPTH_MESSAGE, event.start_mark)
            collection = (
                yaml.SequenceNode if kind is events.SequenceStartEvent else yaml.MappingNode
            )
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolve(collection, None, event.implicit)
            opened = collection(tag, [], event.start_mark, None, event.flow_style)
            _anchor(anchors, event, opened)
            stack.append(_Open(opened, event.anchor))
            continue
        elif kind is events.SequenceEndEvent or kind is events.MappingEndEvent:
            closed = stack.pop()
            node = closed.node
            node.end_mark = event.end_mark
            weight = (closed.values, closed.chars)
            if closed.anchor is not None:
                weights[closed.anchor] = weight
        elif kind is events.AliasEvent:
            if event.anchor not in anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                )
            node = anchors[event.anchor]
            weight = weights.get(event.anchor, (1, 0))
            via_aliases[0] += weight[0]
            via_aliases[1] += weight[1]
            if via_aliases[0] > MAX_ALIAS_NODES:
                raise LimitExceeded(None, None, ALIAS_NODES_MESSAGE, event.start_mark)
            if via_aliases[1] > MAX_ALIAS_CHARS:
                raise LimitExceeded(None, None, ALIAS_CHARS_MESSAGE, event.start_mark)
        elif kind is events.DocumentStartEvent:
            anchors, weights, via_aliases = {}, {}, [0, 0]
            continue
        elif kind is events.DocumentEndEvent:
            if root is not None:
                yield root
            root = None
            continue
        elif kind is events.StreamEndEvent:
            return
        else:  # the stream's start
            continue
        if not stack:
            root = node
            continue
        parent = stack[-1]
        parent.values += weight[0]
        parent.chars += weight[1]
        if isinstance(parent.node, yaml.SequenceNode):
            parent.node.value.append(node)
        elif parent.key is None:
            parent.key = node
        else:
            parent.node.value.append((parent.key, node))
            parent.key = None


DEPTH_MESSAGE = (
    f"nested deeper than {MAX_DEPTH} levels: botctl does not read deeper YAML (a chatbot "
    "document needs 6)"
)
ALIAS_NODES_MESSAGE = (
    f"with this alias, the document's aliases expand to more than {MAX_ALIAS_NODES:,} "
    "values: botctl does not build them (an alias bomb?)"
)
ALIAS_CHARS_MESSAGE = (
    f"with this alias, the document's aliases expand to more than {MAX_ALIAS_CHARS:,} "
    "characters: botctl does not build them (an alias bomb?)"
)
FILE_TOO_LARGE = (
    f"larger than {MAX_FILE_BYTES // 2**20} MiB: botctl does not read a configuration file "
    "this large (split it into several files)"
)


def _anchor(anchors: dict[str, yaml.Node], event: Any, node: yaml.Node) -> None:
    if event.anchor is None:
        return
    first = anchors.get(event.anchor)
    if first is not None:
        raise yaml.composer.ComposerError(
            f"found duplicate anchor {event.anchor!r}; first occurrence",
            first.start_mark,
            "second occurrence",
            event.start_mark,
        )
    anchors[event.anchor] = node


def parse_documents(text: str, file: str) -> tuple[list[LocatedDocument], list[Problem]]:
    """Every non-empty document of a YAML stream, located; YAML errors, and input beyond
    botctl's bounds, as located problems."""
    problems: list[Problem] = []
    documents: list[LocatedDocument] = []
    try:
        for node in _compose_all(text):
            doc = LocatedDocument(file=file, value=None, start=_mark(node))
            doc.value = _Walker(doc, problems).value(node, ())
            if doc.value is not None:
                documents.append(doc)
    except LimitExceeded as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problems.append(Problem(file, line, col, str(exc.problem)))
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
