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
from sys import intern
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


class LocatedDocument:
    """One YAML document's plain value, and where each of its values and keys starts.

    The places are found the first time one is asked for (a problem to locate, ``botctl
    render``'s origins), by reading the document again: a configuration that loads without a
    problem never pays for them, in time or memory (a fleet of 5,000 chatbots holds a million).
    """

    __slots__ = ("_index", "_keys", "_text", "_values", "file", "start", "value")

    def __init__(self, file: str, value: Any, start: Mark, text: str = "", index: int = 0) -> None:
        self.file = file
        self.value = value
        self.start = start
        self._text = text  # the stream it was read from, and its place there
        self._index = index
        self._values: dict[Path, Mark] | None = None
        self._keys: dict[Path, Mark] | None = None

    @property
    def values(self) -> dict[Path, Mark]:
        """Where each value starts, by path."""
        if self._values is None:
            self._locate()
        assert self._values is not None
        return self._values

    @property
    def keys(self) -> dict[Path, Mark]:
        """Where each mapping key starts, by the path of its value."""
        if self._keys is None:
            self._locate()
        assert self._keys is not None
        return self._keys

    def _locate(self) -> None:
        places = _Places()
        for index, node in enumerate(_compose_all(self._text)):
            if index == self._index:
                _Walker(self.file, [], places).value(node, 0, ())
                break
        self._values, self._keys = places.values, places.keys

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


@dataclass
class _Places:
    """Where a document's values and keys start, as the walker records them."""

    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)

    def forget(self, path: Path) -> None:
        """Drop the positions recorded for ``path`` and everything below it."""
        for index in (self.values, self.keys):
            for known in [p for p in index if p[: len(path)] == path]:
                del index[known]


class _Walker:
    """Nodes -> plain values, each problem located at its node. With ``places``, it also
    records where every value and key starts, by path (paths are built only then)."""

    def __init__(self, file: str, problems: list[Problem], places: _Places | None = None) -> None:
        self.file = file
        self.problems = problems
        self.places = places
        self.constructor = yaml.SafeLoader("")
        self.open: set[int] = set()  # collection nodes being walked: an alias to one recurses

    def _problem(self, node: yaml.Node, message: str) -> None:
        line, col = _mark(node)
        self.problems.append(Problem(self.file, line, col, message))

    def value(self, node: yaml.Node, depth: int, path: Path) -> Any:
        """``path``: where ``node`` is, when places are recorded (else ``()``)."""
        if self.places is not None:
            self.places.values[path] = _mark(node)
        if isinstance(node, yaml.CollectionNode):
            if depth >= MAX_DEPTH:  # nested through aliases: each level was written once
                self._problem(node, DEPTH_MESSAGE)
                return None
            if id(node) in self.open:
                self._problem(node, "invalid YAML: an alias refers to itself")
                return None
            self.open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self.mapping(node, depth, path)
                if self.places is None:
                    return [self.value(item, depth + 1, ()) for item in node.value]
                return [
                    self.value(item, depth + 1, (*path, i)) for i, item in enumerate(node.value)
                ]
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
            reason = getattr(exc, "problem", None) or str(exc) or type(exc).__name__
            if isinstance(exc, KeyError | AttributeError):
                reason = f"not a valid {node.tag.rsplit(':', 1)[-1]}"
            # Never a plain string here (those returned above): quoting makes it one.
            self._problem(
                node, f"invalid value {node.value!r}: {reason} (quote it if it is meant as text)"
            )
            return None

    def mapping(self, node: yaml.MappingNode, depth: int, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = {}
        placed: dict[str, yaml.Node] = {}  # the key node of each key in ``result``
        written: set[str] = set()  # keys this mapping writes itself (not merged with "<<")
        places = self.places
        for key_node, value_node, own in self._pairs(node):
            if key_node.tag == _STR_TAG and isinstance(key_node, yaml.ScalarNode):
                key = key_node.value  # nearly every key: a plain string, nothing to construct
            else:
                key = self.value(key_node, depth + 1, (*path, "<key>") if places else ())
            if not isinstance(key, str):
                self._problem(key_node, f"keys must be strings, got {key!r}")
                continue
            child = (*path, key) if places is not None else ()
            if key in result and key not in written:
                if places is not None:
                    places.forget(child)  # a merged value, overridden: later pairs win
                del result[key]
            if key in result:
                first = _mark(placed[key])[0]
                self._problem(key_node, f"duplicate key {key!r} (first at line {first})")
                continue
            if own:
                written.add(key)
            placed[key] = key_node
            if places is not None:
                places.keys[child] = _mark(key_node)
            result[key] = self.value(value_node, depth + 1, child)
        if places is not None:
            places.values.pop((*path, "<key>"), None)
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
                if not isinstance(source, yaml.MappingNode):
                    self._problem(
                        source, "invalid YAML: '<<' merges a mapping or a list of mappings"
                    )
                elif id(source) in self.open:
                    self._problem(source, "invalid YAML: an alias refers to itself")
                else:
                    self.open.add(id(source))
                    try:
                        merged += [(k, v, False) for k, v, _ in self._pairs(source)]
                    finally:
                        self.open.discard(id(source))
        return merged + own


class LimitExceeded(yaml.MarkedYAMLError):
    """Input beyond botctl's bounds: valid YAML, refused."""


# Scalars this short are interned: a fleet's documents repeat the same keys and many of the
# same values (a type, a model, a label), held once rather than once per document.
_SHORT = 64
_SEQ_TAG = Resolver.DEFAULT_SEQUENCE_TAG
_MAP_TAG = Resolver.DEFAULT_MAPPING_TAG
# The implicit tag of a plain scalar depends on its text alone (the safe resolver has no path
# resolvers): resolved once per distinct short text, rather than by a regular expression each
# time it appears.
_TAGS: dict[tuple[str, tuple[bool, bool]], str] = {}
_TAGS_MAX = 50_000


def _scalar_tag(resolve: Any, value: str, implicit: tuple[bool, bool]) -> str:
    if len(value) > _SHORT:
        return str(resolve(yaml.ScalarNode, value, implicit))
    key = (value, implicit)
    tag = _TAGS.get(key)
    if tag is None:
        if len(_TAGS) >= _TAGS_MAX:
            _TAGS.clear()
        tag = _TAGS[key] = resolve(yaml.ScalarNode, value, implicit)
    return tag


class _Open:
    """A collection being composed, and what its children weigh so far."""

    __slots__ = ("anchor", "chars", "items", "key", "node", "sequence", "values")

    def __init__(self, node: yaml.CollectionNode, anchor: str | None) -> None:
        self.node = node
        self.items: list[Any] = node.value
        self.sequence = isinstance(node, yaml.SequenceNode)
        self.anchor = anchor
        self.key: yaml.Node | None = None  # a mapping's key waiting for its value
        self.values = 1  # what the collection builds: itself and its children
        self.chars = 0


_SCALAR = events.ScalarEvent
_SEQUENCE_START, _MAPPING_START = events.SequenceStartEvent, events.MappingStartEvent
_SEQUENCE_END, _MAPPING_END = events.SequenceEndEvent, events.MappingEndEvent


class _Composer:
    """One document's anchors, what each anchored value builds (values, characters, once
    complete: what an alias to it costs; an alias to a collection still open, itself, is the
    walker's error), what the aliases have built so far, and the collections still open."""

    def __init__(self) -> None:
        self.anchors: dict[str, yaml.Node] = {}
        self.weights: dict[str, tuple[int, int]] = {}
        self.via_aliases = [0, 0]
        self.stack: list[_Open] = []

    def anchor(self, event: Any, node: yaml.Node, weight: tuple[int, int] | None) -> None:
        _anchor(self.anchors, event, node)
        if weight is not None:
            self.weights[event.anchor] = weight

    def open(self, event: Any, kind: type) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise LimitExceeded(None, None, DEPTH_MESSAGE, event.start_mark)
        sequence = kind is _SEQUENCE_START
        tag = event.tag
        if tag is None or tag == "!":  # no path resolvers: the kind's default tag
            tag = _SEQ_TAG if sequence else _MAP_TAG
        collection = yaml.SequenceNode if sequence else yaml.MappingNode
        opened = collection(tag, [], event.start_mark, None, event.flow_style)
        if event.anchor is not None:
            self.anchor(event, opened, None)
        self.stack.append(_Open(opened, event.anchor))

    def close(self, event: Any) -> tuple[yaml.Node, int, int]:
        closed = self.stack.pop()
        closed.node.end_mark = event.end_mark
        if closed.anchor is not None:
            self.weights[closed.anchor] = (closed.values, closed.chars)
        return closed.node, closed.values, closed.chars

    def alias(self, event: Any) -> tuple[yaml.Node, int, int]:
        if event.anchor not in self.anchors:
            raise yaml.composer.ComposerError(
                None, None, f"found undefined alias {event.anchor!r}", event.start_mark
            )
        values, chars = self.weights.get(event.anchor, (1, 0))
        self.via_aliases[0] += values
        self.via_aliases[1] += chars
        if self.via_aliases[0] > MAX_ALIAS_NODES:
            raise LimitExceeded(None, None, ALIAS_NODES_MESSAGE, event.start_mark)
        if self.via_aliases[1] > MAX_ALIAS_CHARS:
            raise LimitExceeded(None, None, ALIAS_CHARS_MESSAGE, event.start_mark)
        return self.anchors[event.anchor], values, chars


def _compose_all(text: str) -> Iterator[yaml.Node]:
    """The root node of every document, as PyYAML's composer builds them (anchors, aliases,
    resolved tags, marks), in a loop; raises LimitExceeded beyond the bounds above and
    yaml.MarkedYAMLError for invalid YAML. Scalars, most of the events, are handled inline."""
    parser = _PARSER(text)
    get_event, resolve = parser.get_event, parser.resolve
    composer = _Composer()
    root: yaml.Node | None = None
    while True:
        event = get_event()
        kind = type(event)
        node: yaml.Node
        if kind is _SCALAR:
            value = event.value
            if len(value) <= _SHORT:
                value = intern(value)
            tag = event.tag
            if tag is None or tag == "!":
                tag = _scalar_tag(resolve, value, event.implicit)
            node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
            values, chars = 1, len(value)
            if event.anchor is not None:
                composer.anchor(event, node, (values, chars))
        elif kind is _SEQUENCE_START or kind is _MAPPING_START:
            composer.open(event, kind)
            continue
        elif kind is _SEQUENCE_END or kind is _MAPPING_END:
            node, values, chars = composer.close(event)
        elif kind is events.AliasEvent:
            node, values, chars = composer.alias(event)
        elif kind is events.DocumentStartEvent:
            composer = _Composer()
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
        stack = composer.stack
        if not stack:
            root = node
            continue
        parent = stack[-1]
        parent.values += values
        parent.chars += chars
        if parent.sequence:
            parent.items.append(node)
        elif parent.key is None:
            parent.key = node
        else:
            parent.items.append((parent.key, node))
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


class _NodesNeeded(Exception):
    """A document the direct path does not build: the composed nodes and the walker do."""


class _Building:
    """A collection the direct path is building: its value, and a mapping's key waiting."""

    __slots__ = ("key", "mapping", "value")

    def __init__(self, mapping: bool) -> None:
        self.mapping = mapping
        self.value: Any = {} if mapping else []
        self.key: Any = _NO_KEY


_NO_KEY = object()
# Plain scalars other than text (numbers, booleans, null, dates), as constructed, by tag and
# text: immutable, so one serves every place that writes the same. Bounded.
_CONSTRUCTED: dict[tuple[str, str], Any] = {}


class _Constructor:
    """PyYAML's constructor of the plain scalars that are not text, made when a file first has
    a text not built before (most files have none) and disposed of when the file is done: a
    loader refers to itself, so each one left behind would be work for the cycle collector."""

    __slots__ = ("_loader",)

    def __init__(self) -> None:
        self._loader: yaml.SafeLoader | None = None

    def built(self, tag: str, value: str, event: Any) -> Any:
        key = (tag, value)
        found = _CONSTRUCTED.get(key, _NO_KEY)  # one lookup: another thread may clear it
        if found is not _NO_KEY:
            return found
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        if self._loader is None:
            self._loader = yaml.SafeLoader("")
        try:
            made = self._loader.construct_object(node, deep=True)
        except Exception:  # the walker reports it, located
            raise _NodesNeeded() from None
        if len(_CONSTRUCTED) >= _TAGS_MAX:
            _CONSTRUCTED.clear()
        _CONSTRUCTED[key] = made
        return made

    def dispose(self) -> None:
        if self._loader is not None:
            self._loader.dispose()
            self._loader = None


def _plain(event: Any) -> bool:
    """An event with neither anchor nor explicit tag."""
    return event.anchor is None and (event.tag is None or event.tag == "!")


def _values_all(text: str) -> Iterator[tuple[Any, Mark]]:
    """Every document's plain value and where it starts, built straight from the parser's
    events: what composing nodes and walking them gives (``_compose_all``, ``_Walker``), at
    about half the cost, for a document without anchors, aliases, merge keys, explicit tags,
    or anything the walker would report (a key that is not text, a duplicate key, a scalar
    that cannot be built): those raise ``_NodesNeeded``. Bounded in depth as the composer is."""
    constructor = _Constructor()
    try:
        yield from _built_all(text, constructor)
    finally:
        constructor.dispose()


def _built_all(text: str, constructor: _Constructor) -> Iterator[tuple[Any, Mark]]:
    parser = _PARSER(text)
    get_event, resolve = parser.get_event, parser.resolve
    stack: list[_Building] = []
    root: Any = None
    start: Mark = (1, 1)
    while True:
        event = get_event()
        kind = type(event)
        if kind is _SCALAR:
            if not _plain(event):
                raise _NodesNeeded()
            value = event.value
            if len(value) <= _SHORT:
                value = intern(value)
            tag = _scalar_tag(resolve, value, event.implicit)
            if tag != _STR_TAG:
                value = constructor.built(tag, value, event)
        elif kind is _SEQUENCE_START or kind is _MAPPING_START:
            if not _plain(event):
                raise _NodesNeeded()
            if len(stack) >= MAX_DEPTH:
                raise LimitExceeded(None, None, DEPTH_MESSAGE, event.start_mark)
            if not stack:
                start = (event.start_mark.line + 1, event.start_mark.column + 1)
            stack.append(_Building(kind is _MAPPING_START))
            continue
        elif kind is _SEQUENCE_END or kind is _MAPPING_END:
            value = stack.pop().value
        elif kind is events.DocumentEndEvent:
            yield root, start
            root = None
            continue
        elif kind is events.StreamEndEvent:
            return
        elif kind is events.AliasEvent:
            raise _NodesNeeded()
        else:  # the stream's or a document's start
            continue
        if not stack:
            root = value
            if kind is _SCALAR:
                start = (event.start_mark.line + 1, event.start_mark.column + 1)
            continue
        _add(stack[-1], value)


def _add(parent: _Building, value: Any) -> None:
    if not parent.mapping:
        parent.value.append(value)
    elif parent.key is _NO_KEY:
        if not isinstance(value, str) or value in parent.value:
            raise _NodesNeeded()  # a key that is not text, or a duplicate: the walker says so
        parent.key = value
    else:
        parent.value[parent.key] = value
        parent.key = _NO_KEY


def parse_documents(text: str, file: str) -> tuple[list[LocatedDocument], list[Problem]]:
    """Every non-empty document of a YAML stream, located; YAML errors, and input beyond
    botctl's bounds, as located problems."""
    problems: list[Problem] = []
    documents: list[LocatedDocument] = []
    try:
        try:
            for index, (value, start) in enumerate(_values_all(text)):
                if value is not None:
                    documents.append(LocatedDocument(file, value, start, text, index))
        except _NodesNeeded:
            documents.clear()
            for index, node in enumerate(_compose_all(text)):
                value = _Walker(file, problems).value(node, 0, ())
                if value is not None:
                    documents.append(LocatedDocument(file, value, _mark(node), text, index))
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
