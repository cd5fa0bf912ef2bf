"""Before and after writing: is a saved plan still true of the world, and did the service keep
what was sent? Pure: each takes what was read.

A saved plan relies on what it knew of each chatbot it writes to: the values it read from the
service, the values it took from the state where it could not read (``state_premises``), and
the secrets of the configuration (``resolve_secrets``). It is stale once one of those moved,
and only then: another apply that recorded changes to other chatbots leaves it true. A plan
of another state history (lineage), or made before the state existed, is always refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from botctl.errors import PlanError, StalePlanError
from botctl.models import BotRecord, BotSpec, Live, LiveBot, State
from botctl.plan import Dependency, Operation, Plan
from botctl.reconcile.apply import ApplyReport
from botctl.resources.registry import kind_of, kinds
from botctl.sealing import FingerprintKey, Sealed, Secret, SecretRef, open_strings
from botctl.values import SECRET_MASK, JsonValue, mask_secrets, mask_secrets_in_text, same_value


def state_premises(
    bot: BotSpec, live: LiveBot | None, record: BotRecord | None
) -> list[Dependency]:
    """What a plan that writes to ``bot`` takes from the state: every managed value it could
    not read, as recorded (None: not recorded), sealed values as their ``Sealed``; each kind
    says which (``ResourceKind.premises``)."""
    secrets = bot.secret_values
    return [
        premise
        for kind in kinds()
        for premise in kind.premises(bot.ref, bot, live, record, secrets)
    ]


def resolve_secrets(plan: Plan, environ: Mapping[str, str], key: FingerprintKey) -> Plan:
    """A saved plan with its requests whole again: each ``${secret:VAR}`` read from the
    environment, and checked against the fingerprint of the value the plan was made with.
    Refused, naming the variables, when one is unset or holds another value."""
    resolved: dict[str, Secret] = {}
    unset: dict[str, bool] = {}  # variable -> the plan used the reference's default
    moved: set[str] = set()

    def resolve(ref: SecretRef) -> str:
        value = environ.get(ref.variable, "")
        if not value:
            unset[ref.variable] = unset.get(ref.variable, False) or ref.defaulted
            return ""
        if key.fingerprint(value) != ref.fingerprint:
            moved.add(ref.variable)
        resolved[value] = Secret(value, ref.variable)
        return value

    try:
        operations = tuple(_open(op, resolve) for op in plan.operations)
    except ValueError as exc:
        raise PlanError(f"plan file is malformed: {exc}") from None
    if unset:
        raise PlanError(
            "the plan needs secrets that are not set: "
            + ", ".join(
                f"${name}"
                + (
                    " (the plan was made with the default its ${secret:...} gives in the "
                    "configuration, which a plan file never holds: set it to that value)"
                    if defaulted
                    else ""
                )
                for name, defaulted in sorted(unset.items())
            )
            + ". Nothing was written."
        )
    if moved:
        names = ", ".join(f"${name}" for name in sorted(moved))
        raise StalePlanError(
            f"the secret{'s' if len(moved) > 1 else ''} {names} changed since the plan was "
            "made (the value set now is not the one the plan was made with); nothing was "
            "written. Make a new plan and review it again."
        )
    return replace(plan, operations=operations, secrets=frozenset(resolved.values()))


def _open(op: Operation, resolve: Callable[[SecretRef], str]) -> Operation:
    return replace(
        op,
        body=open_strings(op.body, resolve),
        state_record=open_strings(op.state_record, resolve),
        fallback=open_strings(op.fallback, resolve),
    )


def check_history(plan: Plan, state: State) -> None:
    """Refuse a saved plan made against another state history, or before the state existed."""
    if plan.state_lineage is not None and state.lineage != plan.state_lineage:
        raise StalePlanError(
            "the plan was made against another state lineage (a different or recreated state "
            "file); make a new plan"
        )
    if plan.state_lineage is None and state.lineage is not None:
        raise StalePlanError(
            f"the state changed since the plan was made (serial None -> {state.serial}): "
            "another apply ran and created it; make a new plan"
        )


def check_fresh(plan: Plan, live: Live, state: State, key: FingerprintKey | None) -> None:
    """Refuse a saved plan whose premises moved: the state's history, or any value it relied
    on (read from the service or recorded in the state), saying what moved. ``key``: the key
    of the plan's fingerprints."""
    check_history(plan, state)
    secrets = plan.secret_values
    moved: dict[str, list[str]] = {"service": [], "state": []}
    for dep in plan.depends_on:
        now = current_value(dep, live) if dep.source == "service" else recorded_value(dep, state)
        if not _same(dep.value, now, key):
            before, after = _shown(dep, dep.value, secrets), _shown(dep, now, secrets)
            line = f"{dep.chatbot_id} {dep.resource} {dep.path}: {before} -> {after}"
            moved[dep.source].append(mask_secrets_in_text(line, secrets))
    if not (moved["service"] or moved["state"]):
        return
    lines = []
    if moved["service"]:
        lines.append("the service changed since the plan was made. Moved:")
        lines += [f"  - {m}" for m in moved["service"]]
    if moved["state"]:
        lines.append(
            f"the state changed since the plan was made (serial {plan.state_serial} -> "
            f"{state.serial}): another apply recorded other values for chatbots this plan "
            "writes to. Moved:"
        )
        lines += [f"  - {m}" for m in moved["state"]]
    lines.append("Nothing was written. Make a new plan and review it again.")
    raise StalePlanError("\n".join(lines))


def _same(relied_on: JsonValue, now: JsonValue, key: FingerprintKey | None) -> bool:
    if isinstance(relied_on, Sealed):
        return key is not None and relied_on.matches(now, key)
    return same_value(relied_on, now)


def _shown(dep: Dependency, value: JsonValue, secrets: frozenset[str]) -> str:
    """A value in the refusal: never a secret (``repr`` keeps a value's quotes otherwise)."""
    if value is not None and (dep.secret or isinstance(value, Sealed) or _has_sealed(value)):
        return SECRET_MASK
    return repr(mask_secrets(value, secrets))


def _has_sealed(value: JsonValue) -> bool:
    if isinstance(value, Sealed):
        return True
    if isinstance(value, dict):
        return any(_has_sealed(v) for v in value.values())
    return False


def current_value(dep: Dependency, live: Live) -> JsonValue:
    """What the service holds now for the value a plan relied on (None: absent)."""
    bot = live.bots.get(dep.chatbot_id)
    if bot is None:
        return None
    return kind_of(dep.resource).current_value(bot, dep.path)


def recorded_value(dep: Dependency, state: State) -> JsonValue:
    """What the state records now for the value a plan relied on (None: not recorded)."""
    record = state.record_for(dep.chatbot_id)
    if record is None:
        return None
    return kind_of(dep.resource).recorded_value(record, dep.path)


def verify_applied(
    report: ApplyReport, live: Live, secrets: frozenset[str] = frozenset()
) -> list[str]:
    """After writing, compare what can be read back with what was sent; a note quotes both,
    with every ``secrets`` value masked."""
    notes = []
    for result in report.results:
        op = result.operation
        bot = live.bots.get(op.bot.chatbot_id)
        if result.status != "applied" or bot is None:
            continue
        notes += kind_of(op.resource).read_back_notes(op, bot)
    return [mask_secrets_in_text(note, secrets) for note in notes]
