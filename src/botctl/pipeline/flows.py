"""The commands' pipelines: plan, drift, apply (with its lock, state recording and read-back),
refresh, and export's reads and baseline."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botctl import contract, lint
from botctl.config.document import chatbot_id_problem
from botctl.config.resolve import Fleet
from botctl.defaults import DEFAULT_PARALLELISM
from botctl.errors import (
    BotctlError,
    ImpossibleChangeError,
    PlanError,
    ReadsUnavailable,
    ServiceError,
    StalePlanError,
    StateError,
    StateWriteError,
)
from botctl.models import BotSpec, Desired, Live, LiveBot, State
from botctl.pipeline.scope import scoped
from botctl.pipeline.workspace import Workspace, collector_paused, load, load_resolved
from botctl.plan import BotRef, Operation, Plan, Reads, Scope
from botctl.reconcile import baseline, usage
from botctl.reconcile.apply import ApplyReport, OpResult, Stop, apply_plan
from botctl.reconcile.diff import NOTHING_APPLIED, compute_plan, missing_error
from botctl.reconcile.drift import DriftReport, compute_drift
from botctl.reconcile.freshness import (
    check_fresh,
    check_history,
    resolve_secrets,
    verify_applied,
)
from botctl.reconcile.safety import enforce_safety
from botctl.resources import attributes, settings
from botctl.resources.contacts import (
    ContactBudget,
    Hooks,
    Progress,
    Usage,
    count_values,
    migrations,
)
from botctl.resources.registry import kind_of
from botctl.sealing import FingerprintKey
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
    StateKeyError,
    ensure_key,
    find_key,
    give_key,
)
from botctl.store.protection import check_not_weaker
from botctl.store.state import StateWriter, load_state, read_state, save_state, state_cipher

if TYPE_CHECKING:  # imported where used: a plan never loads what only apply or export need
    from botctl.config.export import Exported
    from botctl.reconcile.rollback import Before
    from botctl.store.planfile import SavedPlan


@dataclass(frozen=True)
class ApplyOutcome:
    plan: Plan
    report: ApplyReport
    not_taken: tuple[str, ...]  # values the service did not keep as sent
    # Why the state could not be written at the end (a full disk): what was applied since
    # its last write is not recorded.
    state_error: StateWriteError | None = None
    interrupted: int | None = None  # what stopped it early (the CLI: a signal number)
    after: Any = None  # what ``after_apply`` returned (apply --test: the tests' outcome)


@dataclass(frozen=True)
class Applied:
    """What a step run after a complete apply gets (``apply --test``), inside the apply's
    state lock and with its clients: the plan, its report, the settings known before it
    (``reconcile.rollback``), and the writer that records in the state."""

    plan: Plan
    report: ApplyReport
    previous: Before
    clients: Mapping[str, ServiceClient]
    writer: StateWriter


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
    with open_backend(ws.state_path) as backend:
        with collector_paused():  # a state's records are as many objects as the YAML's
            state = load_state(backend)
        _choose_encryption(state, ws, backend)
        _require_key(state, fleet.desired, backend, create=create_key)
        if create_key:  # a plan saved to a file: its fingerprints no weaker than the state's
            check_not_weaker(state, backend)
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


async def make_drift_and_plan(ws: Workspace) -> tuple[DriftReport, Plan]:
    """Drift and the plan, from one read of the service (the agent: drift classifies what
    can be read; the plan also holds what would be sent where nothing can be read)."""
    desired, state, _ = _open_run(ws, create_key=False)
    live, notes = await _read(ws, desired.bots)
    return _drift_of(desired, live, state, ws, notes), _compute_plan(
        desired, live, state, ws, notes
    )


async def run_apply(
    ws: Workspace,
    *,
    saved: SavedPlan | None,
    show: Callable[[Plan], None],
    confirm: Callable[[Plan], bool],
    on_result: Callable[[OpResult], None],
    stop: Stop | None = None,
    on_migration: Callable[[Operation, Progress], None] = lambda op, progress: None,
    held: StateBackend | None = None,
    after_apply: Callable[[Applied], Awaitable[Any]] | None = None,
) -> ApplyOutcome | None:
    """Plan (or take the saved plan), refuse it when a chatbot is missing (unless
    ``skip_missing``), show it, check the safety caps, ask ``confirm``, record the baseline
    the service verified, apply, record state, read back. Returns None when there was
    nothing to send or it was not confirmed.

    ``stop`` is armed once writing begins: a request then ends the apply early (see
    ``reconcile.apply.Stop``), what finished is recorded, and the outcome says what stopped
    it. Before that, nothing was written, and the caller interrupts the run as it likes.

    ``held``: the state's backend when the caller already holds its lock (the agent's lease,
    ``store.lock.LeasedBackend``): used as it is, no lock taken.

    ``after_apply`` runs once an apply completed (every operation applied, not stopped, the
    state written), still under the lock: its result is the outcome's ``after``."""
    fleet = load_resolved(ws) if saved is None else None
    if saved is not None:
        ws = _reading_as_planned(ws, saved.plan)
    stop = stop if stop is not None else Stop()
    with contextlib.ExitStack() as held_for_the_run:
        took_over = None
        if held is not None:
            backend = held
        else:
            from botctl.store.lock import StateLock

            backend = held_for_the_run.enter_context(open_backend(ws.state_path))
            lock = held_for_the_run.enter_context(
                StateLock(backend, timeout=ws.lock_timeout, command="apply")
            )
            took_over = lock.took_over
        stored = read_state(backend)
        state = stored.state
        if took_over is not None:  # a killed run's lock: shown with the plan's warnings
            state.warnings.append(took_over)
        _choose_encryption(state, ws, backend)
        if saved is not None and saved.encrypted and state.lineage is None:
            _choose_encryption(state, replace(ws, state_encryption="passphrase"), backend)
        if fleet is not None:
            _require_key(state, fleet.desired, backend, create=False)
            _protect(state, ws, fleet.desired)  # every chatbot's secrets, in scope or not
        check_not_weaker(state, backend)  # before anything is read or sent
        desired, scope = scoped(ws, fleet, state) if fleet is not None else (None, None)
        bots = list(desired.bots) if desired is not None else _bots_of(saved)
        # A saved plan's secrets first: the reads must be traced (--debug) with them masked.
        opened = _open_saved(saved, state, ws) if saved is not None else None
        async with connect(_refs(bots), ws.environ, _service(ws, bots)) as clients:
            live = await read_live(bots, clients, concurrency=ws.parallelism)
            if opened is not None:
                plan, key = opened
                check_fresh(plan, live, state, key)
                plan = replace(plan, rate_limit=ws.service.rate_limit)  # this run's pace
            else:
                assert desired is not None
                read_notes = (*refused_read_notes(clients), *state.warnings)
                plan = await _counted_plan(desired, live, state, ws, read_notes, clients, scope)
            # A missing chatbot is the first thing said: without --skip-missing, all that is
            # (nothing will be applied, so no plan to review either).
            missing = missing_error(plan, NOTHING_APPLIED)
            if missing is not None and not ws.skip_missing:
                raise missing
            show(plan)
            writer = StateWriter(state, backend, version=stored.version, command="apply")
            if plan.empty:
                _record(writer, baseline.matching(desired, live) if desired else ())
                _record_rollout(writer, desired, fleet)
                writer.flush()
                writer.raise_if_failed()
                if after_apply is None:
                    return None
                nothing = ApplyReport(())
                after = await after_apply(Applied(plan, nothing, {}, clients, writer))
                writer.flush()
                return ApplyOutcome(plan, nothing, (), state_error=writer.error, after=after)
            enforce_safety(plan, force=ws.force)
            _check_renames_can_read(plan, ws)
            if not confirm(plan):
                return None
            _record(writer, baseline.matching(desired, live) if desired else ())
            writer.flush()
            writer.raise_if_failed()  # nothing is sent yet: better not than unrecorded
            from botctl.reconcile.rollback import previous_values

            previous = previous_values(plan, live, state) if after_apply else {}
            after = None
            stop.armed = True
            try:
                hooks = _migration_hooks(writer, on_migration)
                report = await _apply_recording(plan, clients, writer, ws, on_result, stop, hooks)
                notes = (
                    []
                    if stop.requested
                    else await stop.guard(
                        _read_back(report, bots, clients, writer, ws, frozenset(ws.secrets)),
                        lambda: ["the read-back was interrupted: what was sent is not verified"],
                    )
                )
                complete = report.ok and not stop.requested
                if complete:
                    _record_rollout(writer, desired, fleet)
                writer.flush()
                if after_apply and complete and writer.error is None:
                    after = await after_apply(Applied(plan, report, previous, clients, writer))
            finally:
                stop.settle()
                writer.flush()
    return ApplyOutcome(
        plan,
        report,
        tuple(notes),
        state_error=writer.error,
        interrupted=stop.reason,
        after=after,
    )


def _check_renames_can_read(plan: Plan, ws: Workspace) -> None:
    """A rename reads the contacts to move their values: refused before anything is sent
    when this run may not read them."""
    off = "--no-reads" if ws.service.no_reads else "--no-contact-reads"
    if not (ws.service.no_reads or ws.service.no_contact_reads):
        return
    renames = [op.label for op in plan.operations if kind_of(op.resource).reads_contacts(op)]
    if renames:
        raise PlanError(
            f"a rename moves the contacts' values and must read them, which {off} forbids: "
            f"{', '.join(renames)}; nothing was applied (run without {off})"
        )


def _record_rollout(writer: StateWriter, desired: Desired | None, fleet: Fleet | None) -> None:
    """After a complete apply of the configuration: the chatbots with a staged-rollout record
    now run this revision (``resources.rollout``); an outcome of other tests no longer holds.
    The revision is that of the configuration as loaded for this apply (``fleet``, its tests
    too: a revision covers them), never as the files stand once it is done."""
    rollout = writer.state.rollout
    if desired is None or fleet is None or not any(b.chatbot_id in rollout for b in desired.bots):
        return
    from botctl.config.revision import revisions

    current = revisions(fleet)
    for bot in desired.bots:
        record = rollout.get(bot.chatbot_id)
        revision = current.get(bot.chatbot_id)
        if record is not None and revision is not None and record.applied(revision) != record:
            rollout[bot.chatbot_id] = record.applied(revision)
            writer.state.record(bot.ref)
            writer.touched(bot.chatbot_id, f"{bot.chatbot_id}: rollout revision {revision}")


def _protect(state: State, ws: Workspace, desired: Desired) -> None:
    """What the state must write only as fingerprints: the configuration's secrets, and the
    places its documents hold one (``State.protect``)."""
    state.protect(ws.secrets, {bot.chatbot_id: bot.secret_locations() for bot in desired.bots})


def _open_saved(saved: SavedPlan, state: State, ws: Workspace) -> tuple[Plan, FingerprintKey]:
    """The saved plan with its requests whole, if it is of this state's history and its
    secrets are as they were (taken from the environment again); and the key of its
    fingerprints, for ``check_fresh`` once the service is read."""
    check_history(saved.plan, state)
    salt = saved.salt or state.salt
    if salt is None:
        raise StalePlanError(
            "the state no longer holds the salt of the plan's fingerprints (it was replaced "
            "by an older copy); make a new plan"
        )
    if saved.key_check is None:
        key = FingerprintKey(salt)  # a plan made against a state of format 3
    else:
        if state.state_key is None:
            raise StateKeyError(
                f"the plan's fingerprints were made under a state key, and none is set: "
                f"{state.key_hint}"
            )
        key = FingerprintKey(salt, state.state_key)
        if key.check != saved.key_check:
            raise StalePlanError(
                "the plan's fingerprints were made under another state key than the one set "
                f"now ({state.key_hint}); make a new plan"
            )
    plan = resolve_secrets(saved.plan, ws.environ, key)
    ws.secrets.update(plan.secret_values)
    state.protect(plan.secret_values, {})
    return plan, key


async def apply_unattended(
    ws: Workspace, on_result: Callable[[OpResult], None] = lambda _: None
) -> ApplyOutcome | None:
    """``apply --auto-approve``, as the demo, benchmarks and tests drive it."""
    return await run_apply(
        ws, saved=None, show=lambda _: None, confirm=lambda _: True, on_result=on_result
    )


def _reading_as_planned(ws: Workspace, saved: Plan) -> Workspace:
    """A saved plan is applied reading as it was made: one made with --no-reads sends no
    read; one that relied on reads re-reads them to refuse it if they moved, so it cannot
    be applied with --no-reads."""
    if saved.reads == "none":
        return replace(ws, service=replace(ws.service, no_reads=True))
    if ws.service.no_reads:
        raise PlanError(
            "this plan was made from what the service answered, and apply --plan reads it "
            "again to refuse the plan if anything moved: run it without --no-reads (or make "
            "the plan with --no-reads)"
        )
    return ws


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


def _bots_of(saved: SavedPlan | None) -> list[BotSpec]:
    refs = saved.plan.bots if saved is not None else ()
    return [BotSpec(name=r.name, chatbot_id=r.chatbot_id, api_key_env=r.api_key_env) for r in refs]


def _record(writer: StateWriter, found: Iterable[baseline.Verified]) -> None:
    """Record values read from the service as verified, in the state ``writer`` writes."""
    for verified in found:
        if writer.state.record_verified(verified.bot, verified.values):
            writer.touched(verified.bot.chatbot_id)


async def _apply_recording(
    plan: Plan,
    clients: Mapping[str, ServiceClient],
    writer: StateWriter,
    ws: Workspace,
    on_result: Callable[[OpResult], None],
    stop: Stop,
    hooks: Hooks,
) -> ApplyReport:
    """Apply, recording each success in the state as it happens (coalesced writes, each a
    compare-and-swap against the previous one)."""

    def record(result: OpResult) -> None:
        if result.status == "applied":
            writer.record(result.operation)
        on_result(result)

    # A rename's contact updates at once: twice the chatbots' bound, within the client's own
    # pace (--rate-limit) and 429 regime.
    with migrations(hooks, max(4, 2 * ws.parallelism)):
        return await apply_plan(
            plan, clients, on_result=record, parallelism=ws.parallelism, stop=stop
        )


def _migration_hooks(writer: StateWriter, shown: Callable[[Operation, Progress], None]) -> Hooks:
    """A rename's progress goes to the state (written at the writer's pace, so a run killed
    midway resumes about where it stopped) and to ``shown``."""

    def recorded(op: Operation) -> Progress | None:
        record = writer.state.record_for(op.bot.chatbot_id)
        found = record.migrations.get(op.subject) if record is not None else None
        return Progress.from_json(found, str(op.body["from"]))

    def progress(op: Operation, now: Progress) -> None:
        writer.state.record(op.bot).migrations[op.subject] = now.to_json()
        writer.touched(
            op.bot.chatbot_id,
            f"{op.bot.name}: rename {now.source} -> {op.subject}: {now.moved} moved ({now.phase})",
        )
        shown(op, now)

    return Hooks(recorded, progress)


async def _read_back(
    report: ApplyReport,
    bots: Sequence[BotSpec],
    clients: Mapping[str, ServiceClient],
    writer: StateWriter,
    ws: Workspace,
    secrets: frozenset[str],
) -> list[str]:
    """Re-read the chatbots written to: record what reads back as sent as verified, and
    report what does not. A failing read only costs the check: the writes are done and
    recorded, so it must not turn the apply into an error."""
    written = {r.operation.bot.chatbot_id for r in report.results if r.status == "applied"}
    touched = [b for b in bots if b.chatbot_id in written]
    if not touched:
        return []
    try:
        after = await read_live(touched, clients, concurrency=ws.parallelism)
    except ServiceError as exc:
        return [f"could not read back to verify: {exc}"]
    _record(writer, baseline.read_back(report, after))
    return verify_applied(report, after, secrets)


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
