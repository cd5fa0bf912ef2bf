"""The commands' pipelines: plan, drift, apply (with its lock, state recording and read-back),
refresh, and export's reads and baseline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from botctl import contract, lint
from botctl.config.document import chatbot_id_problem
from botctl.defaults import DEFAULT_PARALLELISM
from botctl.errors import (
    BotctlError,
    ImpossibleChangeError,
    ReadsUnavailable,
    StateError,
)
from botctl.models import BotSpec, Desired, Live, LiveBot, State
from botctl.pipeline.scope import scoped
from botctl.pipeline.workspace import Workspace, collector_paused, load, load_resolved
from botctl.plan import BotRef, Plan, Reads, Scope
from botctl.reconcile import baseline, usage
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import DriftReport, compute_drift
from botctl.resources import attributes, settings
from botctl.resources.contacts import (
    ContactBudget,
    Usage,
    count_values,
)
from botctl.service.client import ServiceClient
from botctl.service.connect import connect
from botctl.service.live import read_live, refused_read_notes
from botctl.service.options import ServiceOptions
from botctl.service.redact import Redactor
from botctl.store.backend import StateBackend
from botctl.store.backends import StateLocation, open_backend
from botctl.store.files import replace_files, write_new_files
from botctl.store.keys import (
    FOR_ENCRYPTION,
    FOR_SECRETS,
    ensure_key,
    find_key,
    give_key,
)
from botctl.store.protection import check_not_weaker
from botctl.store.state import StateWriter, load_state, read_state, save_state, state_cipher

if TYPE_CHECKING:  # imported where used: a plan never loads what only apply or export need
    from botctl.config.export import Exported
    from botctl.store.planfile import SavedPlan


@dataclass(frozen=True)
class RefreshOutcome:
    bots: int  # chatbots of the run
    settings: int  # settings values recorded as verified
    attributes: int  # attributes recorded as verified
    differing: int  # declared values the service holds differently (not recorded)
    missing: tuple[BotRef, ...]
    written: bool  # whether the state changed


async def _read(ws: Workspace, bots: Sequence[BotSpec]) -> tuple[Live, tuple[str, ...]]:
    """What the service shows, and warnings for the reads it refused."""
    async with connect(_refs(bots), ws.environ, _service(ws, bots)) as clients:
        live = await read_live(bots, clients, concurrency=ws.parallelism)
        return live, tuple(lint.coded(lint.READ_REFUSED, n) for n in refused_read_notes(clients))


async def make_plan(ws: Workspace, *, saving: bool = False) -> Plan:
    """The plan; ``saving``: it will be written to a file (``plan --out``), whose
    fingerprints need the state key (a local state's key file is created then)."""
    desired, state, scope = _open_run(ws, create_key=saving)
    async with connect(_refs(desired.bots), ws.environ, _service(ws, desired.bots)) as clients:
        live = await read_live(desired.bots, clients, concurrency=ws.parallelism)
        notes = tuple(lint.coded(lint.READ_REFUSED, n) for n in refused_read_notes(clients))
        notes += tuple(state.warnings)
        plan = await _counted_plan(desired, live, state, ws, notes, clients, scope)
    if saving and state.encrypted:
        plan = replace(plan, state_cipher=state_cipher(state))
    return plan


def _choose_encryption(state: State, ws: Workspace, backend: StateBackend) -> None:
    """--state-encryption: how a new state is kept (and the plans saved against it). An
    existing state keeps its own setting; asking for the other is an error saying how to
    change it."""
    wanted = ws.state_encryption
    if wanted is None:
        return
    encrypt = wanted == "passphrase"
    if state.lineage is None and not encrypt:
        state.encrypted = False  # asked for: not as a state once kept here was (protection)
    if state.lineage is not None and state.encrypted != encrypt:
        now = "encrypted at rest" if state.encrypted else "not encrypted"
        raise StateError(
            f"--state-encryption {wanted}: the state at {backend.where} is {now}, and this "
            f"option only chooses for a new state; `botctl state migrate --state-encryption "
            f"{wanted}` changes it"
        )
    if encrypt and not state.encrypted:
        state.encrypted = True
        if state.state_key is None:
            found = ensure_key(find_key(backend), FOR_ENCRYPTION)
            give_key(state, found)


def read_saved_plan(path: Path, state_path: StateLocation) -> SavedPlan:
    """A plan file; one encrypted at rest is opened with the state's key."""

    def key_of() -> tuple[bytes | None, str]:
        with open_backend(state_path) as backend:
            source = find_key(backend)
        return source.key, source.hint()

    from botctl.store.planfile import read_plan_file

    return read_plan_file(path, key_of)


def _require_key(state: State, desired: Desired, backend: StateBackend, *, create: bool) -> None:
    """A configuration with ``${secret:}`` needs the state key: required from the start with a
    shared backend (its readers must not hold it); a local state's key file is made when a
    fingerprint is first written (``create``: now)."""
    if state.state_key is not None or state.legacy_keyed:
        return
    if not any(bot.secrets for bot in desired.bots):
        return
    source = find_key(backend)
    if source.file is not None and not create:
        return
    found = ensure_key(source, FOR_SECRETS)
    give_key(state, found)


async def _counted_plan(
    desired: Desired,
    live: Live,
    state: State,
    ws: Workspace,
    notes: tuple[str, ...],
    clients: Mapping[str, ServiceClient],
    scope: Scope | None = None,
) -> Plan:
    """The plan, with the contacts that carry values for what it archives or renames counted
    (``reconcile.usage``); refused when it archives values without consent. A plan the API
    cannot make says what the refused type changes would strand."""
    try:
        plan = _compute_plan(desired, live, state, ws, notes, scope)
    except ImpossibleChangeError as exc:
        found = usage.type_changes(desired, live)
        if not found:
            raise
        lines = usage.type_change_lines(found, await _count_contacts(found, clients, ws))
        raise ImpossibleChangeError(
            f"{exc}\nContacts carrying values for the attributes whose type differs:\n"
            + "\n".join(lines)
        ) from None
    plan = usage.annotate(plan, await _count_contacts(usage.wanted(plan), clients, ws))
    usage.refuse_archives(plan, desired, ws.contacts)
    return replace(plan, warnings=lint.without_disabled(plan.warnings, ws.disabled_warnings))


async def _count_contacts(
    found: Mapping[str, tuple[BotRef, list[str]]],
    clients: Mapping[str, ServiceClient],
    ws: Workspace,
) -> dict[str, Usage]:
    """One paged read of each chatbot's contacts that has something to count, and only of
    those, within the run's cap."""
    budget = ContactBudget(ws.contacts.max_reads)
    limit = asyncio.Semaphore(max(1, ws.parallelism))

    async def count(bot: BotRef, names: list[str]) -> Usage:
        async with limit:
            return await count_values(clients[bot.api_key_env], bot.chatbot_id, names, budget)

    ids = list(found)
    counted = await asyncio.gather(*(count(*found[chatbot_id]) for chatbot_id in ids))
    return dict(zip(ids, counted, strict=True))


def _compute_plan(
    desired: Desired,
    live: Live,
    state: State,
    ws: Workspace,
    notes: tuple[str, ...],
    scope: Scope | None = None,
) -> Plan:
    with collector_paused():
        plan = compute_plan(desired, live, state, ws.policy, reassert=ws.reassert)
    # The plan's own warnings (BC3xx) are silenced here, those of the configuration on load.
    warnings = lint.without_disabled(
        plan.warnings + notes + _scope_notes(scope), ws.disabled_warnings
    )
    reads: Reads = "none" if ws.service.no_reads else "service"
    return replace(
        plan, reads=reads, warnings=warnings, scope=scope, rate_limit=ws.service.rate_limit
    )


def _scope_notes(scope: Scope | None) -> tuple[str, ...]:
    if scope is None or scope.problem is None:
        return ()
    return (
        f"the configuration at {scope.ref} ({scope.commit[:12]}) does not load, so every "
        f"chatbot is in scope: {scope.problem}",
    )


def _open_run(ws: Workspace, *, create_key: bool) -> tuple[Desired, State, Scope | None]:
    """What a read-only run starts from: the configuration (narrowed to the scope of
    ``--changed-since``, when given), the state with its key (``create_key``: a local
    state's key file is made now, for a plan saved to a file), and the scope."""
    fleet = load_resolved(ws)
    state = read_state_for(ws, fleet.desired, create_key=create_key)
    desired, scope = scoped(ws, fleet, state)
    return desired, state, scope


async def make_drift(ws: Workspace) -> DriftReport:
    desired, state, scope = _open_run(ws, create_key=False)
    live, notes = await _read(ws, desired.bots)
    return _drift_of(desired, live, state, ws, notes, scope)


def _drift_of(
    desired: Desired,
    live: Live,
    state: State,
    ws: Workspace,
    notes: tuple[str, ...],
    scope: Scope | None = None,
) -> DriftReport:
    with collector_paused():
        report = compute_drift(desired, live, state)
    notes += tuple(state.warnings)
    warnings = lint.without_disabled(
        report.warnings + notes + _scope_notes(scope), ws.disabled_warnings
    )
    return replace(report, warnings=warnings, scope=scope)


def read_state_for(ws: Workspace, desired: Desired, *, create_key: bool = False) -> State:
    """The state a pass that writes nothing compares with (a plan, drift, the agent's
    watch), its key required when ``desired`` holds secrets and the backend is shared
    (``create_key``: a local state's key file is made now, for a plan saved to a file)."""
    with open_backend(ws.state_path) as backend:
        with collector_paused():  # a state's records are as many objects as the YAML's
            state = load_state(backend)
        _choose_encryption(state, ws, backend)
        _require_key(state, desired, backend, create=create_key)
        if create_key:  # a plan saved to a file: its fingerprints no weaker than the state's
            check_not_weaker(state, backend)
    return state


def classify(
    ws: Workspace, desired: Desired, live: Live, state: State, notes: tuple[str, ...] = ()
) -> tuple[DriftReport, Plan]:
    """Drift and the plan from one read of the service, no request of their own (the agent:
    drift classifies what can be read; the plan also holds what would be sent where nothing
    can be read)."""
    return _drift_of(desired, live, state, ws, notes), _compute_plan(
        desired, live, state, ws, notes
    )


async def observe(ws: Workspace, desired: Desired, state: State) -> tuple[DriftReport, Plan, Live]:
    """Read ``desired``'s chatbots once, and classify what was read (``classify``)."""
    live, notes = await _read(ws, desired.bots)
    report, plan = classify(ws, desired, live, state, notes)
    return report, plan, live


def _protect(state: State, ws: Workspace, desired: Desired) -> None:
    """What the state must write only as fingerprints: the configuration's secrets, and the
    places its documents hold one (``State.protect``)."""
    state.protect(ws.secrets, {bot.chatbot_id: bot.secret_locations() for bot in desired.bots})


def _service(ws: Workspace, bots: Sequence[BotSpec]) -> ServiceOptions:
    """The run's service options, with the redactor of every secret known so far (the
    configuration's, a saved plan's). With --sandbox and --allow-unknown-models, the embedded
    sandbox accepts the configuration's own models too, as the validator did."""
    options = replace(ws.service, redactor=Redactor(secrets=frozenset(ws.secrets)))
    if not (ws.service.sandbox and ws.allow_unknown_models):
        return options
    models = {bot.settings.model for bot in bots if bot.settings.model}
    unknown = tuple(sorted(models - set(contract.SETTINGS_MODELS)))
    return replace(options, sandbox_models=unknown)


def _refs(bots: Sequence[BotSpec]) -> list[BotRef]:
    return [bot.ref for bot in bots]


def _record(writer: StateWriter, found: Iterable[baseline.Verified]) -> None:
    """Record values read from the service as verified, in the state ``writer`` writes."""
    for verified in found:
        if writer.state.record_verified(verified.bot, verified.values):
            writer.touched(verified.bot.chatbot_id)


async def run_refresh(ws: Workspace) -> RefreshOutcome:
    """Record, as verified, every declared value the service holds: the baseline of chatbots
    adopted with hand-written YAML. Read-only on the service; writes the state only."""
    from botctl.store.lock import StateLock

    desired = load(ws)
    with (
        open_backend(ws.state_path) as backend,
        StateLock(backend, timeout=ws.lock_timeout, command="refresh"),
    ):
        stored = read_state(backend)
        state = stored.state
        _choose_encryption(state, ws, backend)
        _require_key(state, desired, backend, create=False)
        _protect(state, ws, desired)
        live, _ = await _read(ws, desired.bots)
        writer = StateWriter(state, backend, version=stored.version, command="refresh")
        found = list(baseline.matching(desired, live))
        _record(writer, found)
        written = writer.dirty
        writer.flush()
        writer.raise_if_failed()
    plan = compute_plan(desired, live, state)
    return RefreshOutcome(
        bots=len(desired.bots),
        settings=sum(len(v.of(settings.KIND.name)) for v in found),
        attributes=sum(len(v.of(attributes.KIND.name)) for v in found),
        differing=sum(1 for _, c in plan.changes() if c.confidence == "verified"),
        missing=plan.missing,
        written=written,
    )


async def read_for_export(
    chatbot_ids: list[str],
    api_key_env: str,
    environ: Mapping[str, str],
    options: ServiceOptions,
    warn: Callable[[str], None] = lambda _: None,
) -> tuple[list[LiveBot], dict[str, str]]:
    """Read chatbots to export: the ids given, or every chatbot of the account; and their
    names in the chatbot list, by id. An id botctl cannot put into a request path is refused
    before any request when given, and skipped with a ``warn``ing when the service lists it
    (it could reach another endpoint)."""
    unusable = [f"{c!r}, {why}" for c in chatbot_ids if (why := chatbot_id_problem(c))]
    if unusable:
        raise BotctlError(f"unusable chatbot id: {'; '.join(unusable)}; nothing was read")
    ref = BotRef("export", "", api_key_env)
    async with connect([ref], environ, options) as clients:
        client = clients[api_key_env]
        if not chatbot_ids:
            try:
                records = await client.list_chatbots()
            except ReadsUnavailable as exc:
                raise BotctlError(f"export needs the chatbot list: {exc}") from None
            listed = sorted(str(r.get("id") or r.get("chatbotId") or "") for r in records)
            for chatbot_id in listed:
                why = chatbot_id_problem(chatbot_id) if chatbot_id else None
                if why:
                    warn(f"the chatbot list holds the id {chatbot_id!r}, {why}: not exported")
            chatbot_ids = [c for c in listed if c and not chatbot_id_problem(c)]
        bots = [BotSpec(name=c, chatbot_id=c, api_key_env=api_key_env) for c in chatbot_ids]
        live = await read_live(bots, clients, concurrency=DEFAULT_PARALLELISM)
    missing = [c for c in chatbot_ids if not live.bots[c].exists]
    if missing:
        raise BotctlError(f"no such chatbot in the account of ${api_key_env}: {', '.join(missing)}")
    names = live.listed.get(api_key_env)
    if chatbot_ids and names is None:
        raise BotctlError(
            "export needs the chatbot list (GET /get-chatbots), and this service does not "
            "offer it: nothing to export"
        )
    return [live.bots[c] for c in chatbot_ids], dict(names or {})


def write_exported(out: Path, exported: Sequence[Exported]) -> list[Path]:
    """Write every exported document into ``out``, or none: never over an existing file."""
    from botctl.config.export import document_files

    files = document_files(out, exported)
    write_all_or_none(out, files)
    return [path for path, _ in files]


def write_all_or_none(
    out: Path, files: Sequence[tuple[Path, str]], *, replace_existing: bool = False
) -> None:
    """Every file written into ``out``, or none; over an existing one only with
    ``replace_existing`` (without it, one created since the caller checked is an error)."""
    try:
        if replace_existing:
            replace_files(files)
        else:
            write_new_files(files)
    except FileExistsError as exc:  # created since the check
        raise BotctlError(
            f"{exc.filename} already exists: not overwritten, and nothing was written"
        ) from None
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else f" into {out}"
        raise BotctlError(f"cannot write{where}: {exc.strerror}; nothing was written") from None


def record_export(
    state_path: StateLocation, lock_timeout: float, exported: Sequence[Exported], api_key_env: str
) -> None:
    """Record what an export read as the baseline of each chatbot it wrote, so that drift on
    the exported files starts clean."""
    from botctl.store.lock import StateLock

    with (
        open_backend(state_path) as backend,
        StateLock(backend, timeout=lock_timeout, command="export"),
    ):
        stored = read_state(backend)
        state = stored.state
        changed = False
        for doc in exported:
            bot = BotRef(doc.handle, doc.bot.chatbot_id, api_key_env)
            found = baseline.observed(bot, doc.bot)
            changed |= state.record_verified(bot, found.values)
        if changed or state.outdated:
            save_state(
                state, backend, version=stored.version, message="botctl export: baseline recorded"
            )
