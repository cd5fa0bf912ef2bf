"""AttributeSets and Defaults -> the ``BotSpec``s the rest of botctl consumes (which never learns
that sets or defaults exist), with where every value came from, for ``botctl render`` and for
located messages.

How a chatbot is resolved (README "Configuration format", "Fleets"):

1. **Defaults** whose selector matches the chatbot's labels apply in document order: the keys
   the resource kinds let them give (``SpecField.defaults``: ``settings``, ``prune``, ``safety``)
   are laid over each other, then the chatbot's own spec is laid over them: the chatbot's own
   values win. Mappings (``settings``, ``styles``, ``collectCustomerInformation`` and its
   fields, ``safety``) merge field by field; any other value, lists included, replaces what was
   there; an explicit ``~`` (not managed) replaces too. The merged document is then validated
   once, as if it had been written whole (``config.document.chatbot_document``: the models of
   the kinds registered), and each problem is reported in the document the offending value came
   from. A key a kind marks ``added`` (``ignoreAttributes``) takes the Defaults' items first,
   then the chatbot's own, each once.
2. **AttributeSets**: those of the matching Defaults (in order) and then the chatbot's own
   ``attributeSets``, each once. Their attributes come first, then the chatbot's own; a name the
   chatbot declares itself replaces the sets' declarations (warning BC201, once per chatbot);
   the same name declared differently by two included sets is an error naming both places and
   the chatbots that include both.
3. Each kind takes its keys of the resolved spec into its parts of the ``BotSpec``
   (``ResourceKind.from_spec``): nothing here names a kind's parts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from botctl import lint
from botctl.config.checks import (
    CASE_CLASH,
    check_attributes,
    check_match_expressions,
    check_model,
)
from botctl.config.conversation import ConversationTest, resolve_tests
from botctl.config.document import KINDS, AttributeSetDocument, ChatbotModels, chatbot_document
from botctl.config.messages import did_you_mean, error_messages, show
from botctl.config.selection import (
    Operator,
    Requirement,
    Selection,
    matches_all,
    select_names,
)
from botctl.config.sources import Findings, Source
from botctl.config.yamlnodes import Path as NodePath
from botctl.models import BotSpec, Desired
from botctl.resources.attribute_model import CustomAttribute, interned
from botctl.resources.registry import kinds

Origin = tuple[Source, NodePath]
Origins = dict[NodePath, Origin]

_SPEC: NodePath = ("spec",)
# The key of a Chatbot's spec that AttributeSet documents add to: the attribute kind's
# declarations (an AttributeSet is the configuration's way to share them).
SET_KEY = "customAttributes"
# matchExpressions' operators, as the requirements of -l/--selector spell them.
_OPERATORS: dict[str, Operator] = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!exists",
}


@dataclass(frozen=True, eq=False)
class AttributeSet:
    name: str
    source: Source
    attributes: tuple[CustomAttribute, ...]


@dataclass(eq=False)
class DefaultsEntry:
    name: str
    source: Source
    requirements: tuple[Requirement, ...]
    sets: tuple[tuple[str, NodePath], ...]  # the sets it includes, each with its place
    # The values of the keys it adds to each matching chatbot's (``SpecField.merge``), by key.
    added: dict[str, tuple[Any, ...]]
    matched: int = 0


@dataclass(frozen=True, eq=False)
class ResolvedBot:
    spec: BotSpec
    source: Source  # the Chatbot document
    # Where merged values came from (by path in the merged document: a list's items by index
    # where sets or Defaults added some); a path not found here, nor under a prefix found
    # here, is the chatbot's own, at the same place.
    origins: Origins
    defaults: tuple[str, ...]  # the Defaults applied, in order
    sets: tuple[str, ...]  # the AttributeSets included, in order

    def origin(self, path: NodePath) -> Origin | None:
        """The document and place of the value at ``path`` of the resolved document; None when
        no document gave it (botctl's default)."""
        for n in range(len(path), 0, -1):
            hit = self.origins.get(path[:n])
            if hit is not None:
                return hit[0], (*hit[1], *path[n:])
        doc = self.source.doc
        if path in doc.values or path in doc.keys:
            return self.source, path
        return None


@dataclass(frozen=True)
class Fleet:
    """The resolved chatbots of a configuration, and its warnings (already formatted)."""

    bots: tuple[ResolvedBot, ...]
    warnings: tuple[str, ...] = ()
    # Every chatbot id the configuration declares, selected for this run or not.
    declared_ids: frozenset[str] = frozenset()
    # The ConversationTest documents, each against the chatbots of this fleet it covers.
    tests: tuple[ConversationTest, ...] = ()

    @cached_property
    def desired(self) -> Desired:
        return Desired(
            bots=tuple(b.spec for b in self.bots),
            warnings=self.warnings,
            declared_ids=self.declared_ids or frozenset(b.spec.chatbot_id for b in self.bots),
        )

    def selected(self, selection: Selection) -> Fleet:
        if selection.everything:
            return self
        kept = set(select_names([(b.spec.name, b.spec.labels) for b in self.bots], selection))
        return Fleet(
            tuple(b for b in self.bots if b.spec.name in kept),
            self.warnings,
            self.declared_ids or frozenset(b.spec.chatbot_id for b in self.bots),
            tuple(t.narrowed(kept) for t in self.tests),
        )


def resolve(sources: Sequence[Source], found: Findings, allow_unknown_models: bool) -> Fleet:
    """Every document -> the resolved chatbots; problems go to ``found``."""
    by_kind: dict[str, list[Source]] = {kind: [] for kind in KINDS}
    for source in sources:
        kind = source.data.get("kind", "Chatbot")  # missing: reported with the Chatbot model
        if isinstance(kind, str) and kind in by_kind:
            by_kind[kind].append(source)
        else:
            found.error(
                source,
                ("kind",),
                "kind: must be one of 'Chatbot', 'AttributeSet', 'Defaults' or "
                f"'ConversationTest', got {show(kind)}"
                + (did_you_mean(kind, KINDS) if isinstance(kind, str) else ""),
            )
    sets, known_sets = _attribute_sets(by_kind["AttributeSet"], found)
    defaults = _defaults(by_kind["Defaults"], known_sets, allow_unknown_models, found)
    resolver = _Resolver(sets, known_sets, defaults, allow_unknown_models, found)
    bots = [bot for source in by_kind["Chatbot"] if (bot := resolver.chatbot(source))]
    resolver.report_conflicts()
    _duplicate_chatbots(bots, found)
    for aset in sets.values():
        if aset.name not in resolver.included:
            found.warn(
                aset.source,
                lint.UNUSED_SET,
                ("metadata", "name"),
                f"attribute set {aset.name!r} is included by no chatbot",
            )
    for entry in defaults:
        if not entry.matched:
            shown = ",".join(map(str, entry.requirements)) or "{}"
            found.warn(
                entry.source,
                lint.UNMATCHED_DEFAULTS,
                ("spec", "selector"),
                f"defaults {entry.name!r} match no chatbot (selector: {shown})",
            )
    tests = resolve_tests(
        by_kind["ConversationTest"],
        [(b.spec.name, b.spec.labels) for b in bots],
        found,
        allow_unknown_models,
    )
    return Fleet(tuple(bots), declared_ids=frozenset(b.spec.chatbot_id for b in bots), tests=tests)


def _validate(
    source: Source,
    model: type[BaseModel],
    data: Any,
    found: Findings,
    origins: Origins | None = None,
) -> Any:
    """``data`` validated by ``model``; each problem located where its value came from."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for loc, message, key in error_messages(model, exc):
            where, path = _locate(origins or {}, source, loc)
            found.add(where.doc.problem(path, message, key=key))
        return None


def _locate(origins: Origins, source: Source, path: NodePath) -> Origin:
    for n in range(len(path), 0, -1):
        hit = origins.get(path[:n])
        if hit is not None:
            return hit[0], (*hit[1], *path[n:])
    return source, path


def _unique_names(sources: Sequence[Source], what: str, found: Findings) -> list[Source]:
    """The documents whose metadata.name is the first of its kind; repeats are errors."""
    first: dict[str, Source] = {}
    for source in sources:
        name = source.name
        if name and name in first:
            path: NodePath = ("metadata", "name")
            found.error(
                source, path, f"duplicate {what} {name!r} (also in {first[name].where(path)})"
            )
        else:
            first.setdefault(name, source)
    return [s for s in sources if first.get(s.name) is s]


def _attribute_sets(
    sources: Sequence[Source], found: Findings
) -> tuple[dict[str, AttributeSet], set[str]]:
    """The valid sets by name, and every name declared (a broken set is reported once, in its
    own document, not again by each chatbot that includes it)."""
    sets: dict[str, AttributeSet] = {}
    for source in _unique_names(sources, "attribute set", found):
        mark = found.mark()
        check_attributes(source, source.spec.get(SET_KEY), found)
        document = _validate(source, AttributeSetDocument, source.data, found)
        if document is not None and not found.errors_since(mark):
            sets[source.name] = AttributeSet(source.name, source, document.spec.customAttributes)
    return sets, {s.name for s in sources if s.name}


def _set_references(
    source: Source, names: Sequence[str], known: set[str], found: Findings
) -> list[tuple[str, NodePath]]:
    refs = []
    for i, name in enumerate(names):
        path: NodePath = ("spec", "attributeSets", i)
        if name in known:
            refs.append((name, path))
        else:
            found.error(
                source,
                path,
                f"attributeSets: no AttributeSet named {name!r}"
                + did_you_mean(name, sorted(known)),
            )
    return refs


def _defaults(
    sources: Sequence[Source], known_sets: set[str], allow_unknown_models: bool, found: Findings
) -> list[DefaultsEntry]:
    """The valid Defaults documents, in document order."""
    models = chatbot_document()
    entries = []
    for source in _unique_names(sources, "defaults", found):
        mark = found.mark()
        check_model(source, source.spec.get("settings"), allow_unknown_models, found)
        check_match_expressions(source, found)
        document = _validate(source, models.defaults, source.data, found)
        if document is None:
            continue
        refs = _set_references(source, document.spec.attributeSets, known_sets, found)
        if found.errors_since(mark):
            continue
        selector = document.spec.selector
        requirements = [
            Requirement(key, "=", frozenset([value])) for key, value in selector.matchLabels.items()
        ]
        requirements += [
            Requirement(e.key, _OPERATORS[e.operator], frozenset(e.values))
            for e in selector.matchExpressions
        ]
        added = {key: tuple(getattr(document.spec, key)) for key in models.added}
        entries.append(DefaultsEntry(source.name, source, tuple(requirements), tuple(refs), added))
    return entries


def _labels(data: Mapping[str, Any]) -> dict[str, str]:
    metadata = data.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(labels, dict):
        return {}
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def _overlay(
    target: dict[str, Any],
    values: Mapping[str, Any],
    path: NodePath,
    source: Source,
    source_path: NodePath,
    origins: Origins,
) -> None:
    """Lay ``values`` (from ``source`` at ``source_path``) over ``target`` (at ``path`` of the
    merged document), mappings field by field, recording where each value came from. Never
    changes a mapping it did not create: documents' values are shared by every chatbot."""
    for key, value in values.items():
        here, there = (*path, key), (*source_path, key)
        current = target.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            _push_down(origins, here, current)
            merged = dict(current)
            _overlay(merged, value, here, source, there, origins)
            target[key] = merged
        else:
            if isinstance(current, dict):
                _forget(origins, here, current)
            target[key] = value
            origins[here] = (source, there)


def _push_down(origins: Origins, path: NodePath, mapping: Mapping[str, Any]) -> None:
    """A mapping that came whole from one document is about to be merged: its fields keep that
    origin one by one."""
    hit = origins.pop(path, None)
    if hit is not None:
        for key in mapping:
            origins[(*path, key)] = (hit[0], (*hit[1], key))


def _forget(origins: Origins, path: NodePath, mapping: Mapping[str, Any]) -> None:
    for key, value in mapping.items():
        here = (*path, key)
        origins.pop(here, None)
        if isinstance(value, dict):
            _forget(origins, here, value)


def _differences(a: CustomAttribute, b: CustomAttribute) -> str:
    left, right = a.to_json(), b.to_json()
    return ", ".join(
        f"{key} {show(left.get(key))} vs {show(right.get(key))}"
        for key in dict.fromkeys([*left, *right])
        if left.get(key) != right.get(key)
    )


@dataclass
class _Conflict:
    name: str
    first: tuple[AttributeSet, int]
    second: tuple[AttributeSet, int]
    bots: list[str] = field(default_factory=list)


class _Resolver:
    def __init__(
        self,
        sets: dict[str, AttributeSet],
        known_sets: set[str],
        defaults: list[DefaultsEntry],
        allow_unknown_models: bool,
        found: Findings,
    ) -> None:
        self.sets = sets
        self.known_sets = known_sets
        self.defaults = defaults
        self.allow_unknown_models = allow_unknown_models
        self.found = found
        self.included: set[str] = set()  # set names some chatbot includes
        self.models = chatbot_document()
        self.conflicts: dict[tuple[int, int, int, int], _Conflict] = {}

    def chatbot(self, source: Source) -> ResolvedBot | None:
        found, models = self.found, self.models
        mark = found.mark()
        own = source.spec
        applied = (
            [d for d in self.defaults if matches_all(d.requirements, _labels(source.data))]
            if isinstance(source.data.get("spec"), dict)
            else []
        )
        data, origins = _laid_under(source, applied, models)
        check_model(source, own.get("settings"), self.allow_unknown_models, found)
        check_attributes(source, own.get(SET_KEY), found)
        document = _validate(source, models.document, data, found, origins)
        if document is None:
            return None
        refs = [(name, entry.source) for entry in applied for name, _ in entry.sets]
        own_refs = _set_references(source, document.spec.attributeSets, self.known_sets, found)
        refs += [(name, source) for name, _ in own_refs]
        names = list(dict.fromkeys(name for name, _ in refs))
        self.included.update(names)
        if found.errors_since(mark):
            return None
        included = [self.sets[name] for name in names if name in self.sets]
        values = {key: getattr(document.spec, key) for key in _kind_keys()}
        values[SET_KEY] = self._attributes(source, values[SET_KEY], included, origins)
        for key in models.added:
            values[key] = _added(source, key, values[key], applied, origins)
        sources = (source, *(e.source for e in applied), *(s.source for s in included))
        return ResolvedBot(
            spec=_bot_spec(source, document, values, sources),
            source=source,
            origins=origins,
            defaults=tuple(e.name for e in applied),
            sets=tuple(names),
        )

    def _attributes(
        self,
        source: Source,
        own: tuple[CustomAttribute, ...],
        included: Sequence[AttributeSet],
        origins: Origins,
    ) -> tuple[CustomAttribute, ...]:
        """The sets' attributes, then the chatbot's own; each one's place in ``origins`` when
        sets moved them."""
        own_index = {a.name: i for i, a in enumerate(own)}
        chosen: dict[str, tuple[CustomAttribute, AttributeSet, int]] = {}
        overridden: dict[str, list[AttributeSet]] = {}
        for aset in included:
            for j, attribute in enumerate(aset.attributes):
                if attribute.name in own_index:
                    overridden.setdefault(attribute.name, []).append(aset)
                    continue
                previous = chosen.get(attribute.name)
                if previous is None:
                    chosen[attribute.name] = (attribute, aset, j)
                elif previous[0] != attribute:
                    self._conflict(attribute.name, (previous[1], previous[2]), (aset, j), source)
        for name, sets in overridden.items():
            path = ("spec", SET_KEY, own_index[name], "name")
            where = ", ".join(
                f"set {s.name} ({s.source.where(_attribute_path(s, name))})" for s in sets
            )
            self.found.warn(
                source,
                lint.OVERRIDES_SET,
                path,
                f"{name}: declared by chatbot, overrides {where}",
            )
        attributes = tuple(a for a, _, _ in chosen.values()) + tuple(map(interned, own))
        places = tuple((s.source, ("spec", SET_KEY, j)) for _, s, j in chosen.values()) + tuple(
            (source, ("spec", SET_KEY, i)) for i in range(len(own))
        )
        self._case_clashes(attributes, places)
        if chosen:
            origins.update({("spec", SET_KEY, i): place for i, place in enumerate(places)})
        return attributes

    def _case_clashes(
        self, attributes: Sequence[CustomAttribute], origins: Sequence[Origin]
    ) -> None:
        """Names from different documents (a set's and the chatbot's own, two sets') that
        differ only in letter case: an error where the later one is declared."""
        first: dict[str, int] = {}
        for i, attribute in enumerate(attributes):
            j = first.setdefault(attribute.name.casefold(), i)
            if j != i and attributes[j].name != attribute.name:
                (source, path), (other, other_path) = origins[i], origins[j]
                self.found.error(
                    source,
                    (*path, "name"),
                    f"attribute name {attribute.name!r} {CASE_CLASH} {attributes[j].name!r} "
                    f"({other.where(other_path)}), which the chatbot also gets",
                )

    def _conflict(
        self,
        name: str,
        first: tuple[AttributeSet, int],
        second: tuple[AttributeSet, int],
        source: Source,
    ) -> None:
        key = (id(first[0]), first[1], id(second[0]), second[1])
        conflict = self.conflicts.setdefault(key, _Conflict(name, first, second))
        conflict.bots.append(source.name)

    def report_conflicts(self) -> None:
        """Once per pair of declarations, however many chatbots include both."""
        for c in self.conflicts.values():
            (first, i), (second, j) = c.first, c.second
            shown = ", ".join(c.bots[:3])
            if len(c.bots) > 3:
                shown += f" and {len(c.bots) - 3} more"
            self.found.error(
                second.source,
                ("spec", SET_KEY, j, "name"),
                f"attribute {c.name!r} is declared differently here and in set {first.name} "
                f"({first.source.where(('spec', 'customAttributes', i))}): "
                f"{_differences(first.attributes[i], second.attributes[j])}; both sets are "
                f"included by chatbot {shown} (declare it in the chatbot to choose, or make "
                "the sets agree)",
            )


def _kind_keys() -> list[str]:
    return [key for kind in kinds() for key in kind.spec_fields]


def _laid_under(
    source: Source, applied: Sequence[DefaultsEntry], models: ChatbotModels
) -> tuple[Mapping[str, Any], Origins]:
    """The document to validate: the chatbot's own spec laid over the keys its Defaults give
    (in order), and where each merged value came from."""
    origins: Origins = {}
    if not applied:
        return source.data, origins
    spec: dict[str, Any] = {}
    for entry in applied:
        entry.matched += 1
        given = {
            key: entry.source.spec[key]
            for key in models.laid_under
            if entry.source.spec.get(key) is not None
        }
        _overlay(spec, given, _SPEC, entry.source, _SPEC, origins)
    _overlay(spec, source.spec, _SPEC, source, _SPEC, origins)
    return {**source.data, "spec": spec}, origins


def _added(
    source: Source,
    key: str,
    own: tuple[Any, ...],
    applied: Sequence[DefaultsEntry],
    origins: Origins,
) -> tuple[Any, ...]:
    """A key whose Defaults' items come first, then the chatbot's own: each item once, where
    it is first given (its place in ``origins`` when that is not the chatbot's own, at the
    same index)."""
    given = [
        (item, (entry.source, ("spec", key, i)))
        for entry in applied
        for i, item in enumerate(entry.added.get(key, ()))
    ]
    given += [(item, (source, ("spec", key, i))) for i, item in enumerate(own)]
    first: dict[Any, Origin] = {}
    for item, origin in given:
        first.setdefault(item, origin)
    if len(given) > len(own) or len(first) < len(own):
        origins.update({("spec", key, i): origin for i, origin in enumerate(first.values())})
    return tuple(first)


def _bot_spec(
    source: Source, document: Any, values: Mapping[str, Any], sources: Sequence[Source]
) -> BotSpec:
    """The chatbot as the rest of botctl knows it: each kind's parts from its keys."""
    parts = {
        name: part
        for kind in kinds()
        for name, part in kind.from_spec({key: values[key] for key in kind.spec_fields}).items()
    }
    secrets = frozenset().union(*(s.secrets for s in sources))
    secret_texts = frozenset().union(*(s.secret_texts for s in sources))
    return BotSpec.of(
        parts,
        name=document.metadata.name,
        chatbot_id=document.spec.chatbotId,
        labels=document.metadata.labels,
        api_key_env=document.spec.apiKeyEnv,
        source=f"{source.doc.file}:{source.doc.start[0]}",
        secrets=tuple(sorted(secrets, key=lambda s: (s.variable, s.value))),
        secret_texts=tuple(sorted(secret_texts)),
    )


def _attribute_path(aset: AttributeSet, name: str) -> NodePath:
    index = next(i for i, a in enumerate(aset.attributes) if a.name == name)
    return ("spec", SET_KEY, index)


def _duplicate_chatbots(bots: Sequence[ResolvedBot], found: Findings) -> None:
    keys: list[tuple[str, NodePath, Any]] = [
        ("metadata.name", ("metadata", "name"), lambda b: b.spec.name),
        ("chatbotId", ("spec", "chatbotId"), lambda b: b.spec.chatbot_id),
    ]
    for what, path, key in keys:
        first: dict[str, ResolvedBot] = {}
        for bot in bots:
            value = key(bot)
            other = first.setdefault(value, bot)
            if other is bot:
                continue
            found.error(
                bot.source, path, f"duplicate {what} {value!r} (also in {_at(other, path)})"
            )
            found.error(
                other.source, path, f"duplicate {what} {value!r} (also in {_at(bot, path)})"
            )


def _at(bot: ResolvedBot, path: NodePath) -> str:
    return f"{bot.source.doc.file}:{bot.source.doc.mark(path)[0]}"
