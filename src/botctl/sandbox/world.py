"""Changes made outside the v1 API - "in the dashboard": accounts, chatbots, seeds.

Shared by the admin API and `--seed`, so a seed file and an admin call mean the same thing.
Settings and attributes are validated exactly like the v1 writes; errors carry a readable
field path because their audience is a person writing a test or a seed file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from botctl import contract
from botctl.sandbox import validation as v
from botctl.sandbox.config import SandboxConfig, SandboxConfigError
from botctl.sandbox.conversations import add_conversations, conversation_list
from botctl.sandbox.runtime import key_id
from botctl.sandbox.store import Store

JSON = dict[str, Any]


class Conflict(ValueError):
    """The chatbot id already exists."""


def _chatbot_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise v.Invalid(f"{where}: must be a non-empty string without '/'")
    return value


def _attribute_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise v.Invalid(f"{where}: must be an array")
    return value


# Contacts made in bulk: a seed or a test needs thousands quickly (one insert, no v1 request).
MAX_GENERATED_CONTACTS = 1_000_000


def _contact_list(value: Any, where: str) -> list[JSON]:
    from botctl.sandbox.routes_contacts import user_objects

    return user_objects(value, where, limit=None)


def _generated(value: Any, where: str) -> JSON:
    """`{"count": N, "prefix": "c", "start": 1, "custom_attributes": {...}}`: contacts
    `<prefix><i>` for i from start, each with those values (`{i}` in a text value is i)."""
    spec = v.obj(
        value,
        where,
        {"count": v.integer, "prefix": v.string, "start": v.integer, "custom_attributes": _map},
    )
    count = spec.get("count")
    if not isinstance(count, int) or not 1 <= count <= MAX_GENERATED_CONTACTS:
        raise v.Invalid(f"{where}.count: required, 1 to {MAX_GENERATED_CONTACTS}")
    return spec


def _map(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise v.Invalid(f"{where}: must be an object")
    return value


def _expand(spec: JSON) -> list[JSON]:
    prefix, start = spec.get("prefix", "contact-"), spec.get("start", 1)
    values = spec.get("custom_attributes", {})
    users = []
    for i in range(start, start + spec["count"]):
        attrs = {
            k: val.replace("{i}", str(i)) if isinstance(val, str) else val
            for k, val in values.items()
        }
        users.append({"external_id": f"{prefix}{i}", "custom_attributes": attrs})
    return users


def add_contacts(store: Store, chatbot_id: str, fields: JSON) -> int:
    """The `contacts` (v1 create shape) and `generate_contacts` of an admin call or a seed,
    validated like the v1 create, stored in one go. Returns how many were added."""
    from botctl.sandbox.routes_contacts import Clash, build_contacts

    users = list(fields.get("contacts", []))
    for i, spec in enumerate(fields.get("generate_contacts", [])):
        users += _expand(_generated(spec, f"generate_contacts[{i}]"))
    if not users:
        return 0
    try:
        records = build_contacts(store, chatbot_id, users, "contacts")
    except Clash as exc:
        raise v.Invalid(f"contacts: {exc.message} ({exc.detail})") from None
    store.add_contacts(chatbot_id, records)
    return len(records)


def _generator_list(value: Any, where: str) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    return _attribute_list(value, where)


def dashboard_rules(config: SandboxConfig) -> v.Rules:
    """What a dashboard edit may store: the v1 write's rules, plus values the contract
    allows and the v1 write refuses (see `Rules`)."""
    return v.Rules(config.settings_models, dashboard=True)


def _spec(rules: v.Rules) -> dict[str, v.Check]:
    return {
        "id": _chatbot_id,
        "account": v.string,
        "settings": rules.settings,
        "attributes": _attribute_list,
        "icon": v.boolean,
        "contacts": _contact_list,
        "generate_contacts": _generator_list,
        "conversations": conversation_list,
    }


def resolve_account(store: Store, ref: str | None) -> str:
    """A key (or its redacted id from /_sandbox/state); default the first registered key."""
    keys = [k for k, _ in store.accounts()]
    if ref is None:
        if not keys:
            raise v.Invalid("account: no account is registered yet (POST /_sandbox/accounts)")
        return keys[0]
    for key in keys:
        if ref in (key, key_id(key)):
            return key
    raise v.Invalid("account: no such account")


def create_chatbot(store: Store, spec: Any, rules: v.Rules) -> str:
    fields = v.obj(spec, "", _spec(rules))
    if "id" not in fields:
        raise v.Invalid("id: required")
    records: list[JSON] = []
    for i, item in enumerate(fields.get("attributes", [])):
        record = v.attribute_create(item, f"attributes[{i}]")
        if v.name_taken(record["name"], records):
            raise v.Invalid(f"attributes[{i}].name: duplicate {record['name']!r}")
        records.append(record)
    with store.atomic():
        owner = resolve_account(store, fields.get("account"))
        if store.chatbot(fields["id"]) is not None:
            raise Conflict(f"chatbot {fields['id']!r} already exists")
        store.create_chatbot(
            fields["id"], owner, fields.get("settings", {}), fields.get("icon", False)
        )
        for record in records:
            store.put_attribute(fields["id"], record)
        add_contacts(store, fields["id"], fields)
        add_conversations(store, fields["id"], fields.get("conversations", []))
    return str(fields["id"])


def patch_chatbot(store: Store, chatbot_id: str, spec: Any, rules: v.Rules) -> None:
    """Partial settings (nested objects replace whole); attributes upserted by exact name;
    `contacts` (v1 create shape, any number) and `generate_contacts` added after them;
    `conversations` stored (``sandbox.conversations``; one of the same id is replaced).

    Unlike the v1 PUT, an omitted `archived` leaves the flag alone: a dashboard edit changes
    only what it shows. The type of an existing attribute cannot change.

    `off_contract_attributes`: records stored and listed exactly as given, unchecked (a name
    with a space, type "select", `archived: 0`, no name at all): a service that breaks its own
    contract, for a client to show it survives one. They are never what the v1 API returns
    for a well-behaved service; only this admin call makes them.
    """
    checks: dict[str, v.Check] = {
        "settings": rules.settings,
        "attributes": _attribute_list,
        "off_contract_attributes": _attribute_list,
        "icon": v.boolean,
        "contacts": _contact_list,
        "generate_contacts": _generator_list,
        "conversations": conversation_list,
    }
    fields = v.obj(spec, "", checks)
    with store.atomic():
        if store.chatbot(chatbot_id) is None:
            raise KeyError(chatbot_id)
        if "settings" in fields or "icon" in fields:
            store.update_chatbot(chatbot_id, fields.get("settings"), fields.get("icon"))
        existing = store.attributes(chatbot_id)
        for i, item in enumerate(fields.get("attributes", [])):
            where = f"attributes[{i}]"
            name = item.get("name") if isinstance(item, dict) else None
            current = store.attribute(chatbot_id, name) if isinstance(name, str) else None
            if current is None:
                record = v.attribute_create(item, where)
                if v.name_taken(record["name"], existing):
                    raise v.Invalid(f"{where}.name: {record['name']!r} clashes in letter case")
                existing.append(record)
            else:
                rest = {k: val for k, val in item.items() if k not in ("name", "type")}
                if item.get("type", current["type"]) != current["type"]:
                    raise v.Invalid(f"{where}.type: an attribute's type cannot change")
                record = {**current, **v.attribute_update(rest, where)}
            store.put_attribute(chatbot_id, record)
        for item in fields.get("off_contract_attributes", []):
            store.put_raw_attribute(chatbot_id, item)
        add_contacts(store, chatbot_id, fields)
        add_conversations(store, chatbot_id, fields.get("conversations", []))


def _load_seed(path: Path) -> JSON:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SandboxConfigError(f"cannot read seed file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SandboxConfigError(f"seed file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or set(data) - {"accounts", "chatbots"}:
        raise SandboxConfigError(f"seed file {path}: expected a mapping of accounts and chatbots")
    return data


def apply_seed(store: Store, path: Path, rules: v.Rules) -> None:
    """Idempotent: missing accounts are added, chatbots whose id exists are left alone."""
    data = _load_seed(path)
    try:
        for i, acc in enumerate(data.get("accounts") or []):
            fields = v.obj(
                acc, f"accounts[{i}]", {"key": v.string, "plan": v.one_of(*contract.PLANS)}
            )
            if "key" not in fields:
                raise v.Invalid(f"accounts[{i}].key: required")
            if store.plan_of(fields["key"]) is None:
                store.upsert_account(fields["key"], fields.get("plan", "standard"))
        for i, spec in enumerate(data.get("chatbots") or []):
            if isinstance(spec, dict) and store.chatbot(str(spec.get("id"))) is not None:
                continue
            try:
                create_chatbot(store, spec, rules)
            except v.Invalid as exc:
                raise v.Invalid(f"chatbots[{i}]: {exc.detail}") from None
    except v.Invalid as exc:
        raise SandboxConfigError(f"seed file {path}: {exc.detail}") from None


def bootstrap(store: Store, config: SandboxConfig) -> None:
    """Register the configured keys (their plan as given) and apply the seed."""
    for key, plan in config.api_keys.items():
        store.upsert_account(key, plan)
    if config.seed is not None:
        apply_seed(store, config.seed, dashboard_rules(config))
