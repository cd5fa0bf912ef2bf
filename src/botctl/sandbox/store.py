"""SQLite persistence of the sandbox world: accounts, chatbots, attributes, contacts, conversations.

One connection shared across threads (`check_same_thread=False`) and guarded by a re-entrant
lock: the app runs under uvicorn's loop thread and in-process under any caller's loop, and
every critical section here is a few statements long, so nobody ever waits on another's I/O.
Settings are stored as the camelCase JSON of contract 2.1 because that is the write shape;
read shapes are derived from it in `views.py`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT UNIQUE NOT NULL, plan TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chatbots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, account TEXT NOT NULL,
    settings TEXT NOT NULL, icon INTEGER NOT NULL, created_at REAL NOT NULL,
    updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attributes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chatbot_id TEXT NOT NULL, name TEXT NOT NULL,
    record TEXT NOT NULL, UNIQUE (chatbot_id, name));
CREATE TABLE IF NOT EXISTS contacts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chatbot_id TEXT NOT NULL, external_id TEXT NOT NULL,
    record TEXT NOT NULL, UNIQUE (chatbot_id, external_id));
CREATE TABLE IF NOT EXISTS conversations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, chatbot_id TEXT NOT NULL, id TEXT NOT NULL,
    created_at REAL NOT NULL, record TEXT NOT NULL, UNIQUE (chatbot_id, id));
CREATE TABLE IF NOT EXISTS replies (
    chatbot_id TEXT PRIMARY KEY, script TEXT NOT NULL);
"""
_TABLES = ("accounts", "chatbots", "attributes", "contacts", "conversations", "replies")


@dataclass(frozen=True)
class Chatbot:
    id: str
    account: str
    settings: JSON
    icon: bool
    created_at: float
    updated_at: float


def _connect(db: str) -> sqlite3.Connection:
    if db != ":memory:":
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    if db != ":memory:":
        # WAL keeps a restarted sandbox (or a reader) from blocking on the previous writer.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


class Store:
    """All persistent state. Methods are atomic; `atomic()` groups several into one."""

    def __init__(self, db: str) -> None:
        self._conn = _connect(db)
        self._lock = threading.RLock()
        self._depth = 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._conn
            except BaseException:
                self._depth -= 1
                if outer:
                    self._conn.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._conn.execute("COMMIT")

    def reset(self) -> None:
        with self.atomic() as c:
            for table in _TABLES:
                c.execute(f"DELETE FROM {table}")

    # -- accounts ---------------------------------------------------------------------------
    def upsert_account(self, key: str, plan: str) -> bool:
        """Register `key` (or change its plan); True when the account is new."""
        with self.atomic() as c:
            if c.execute("SELECT 1 FROM accounts WHERE key = ?", (key,)).fetchone():
                c.execute("UPDATE accounts SET plan = ? WHERE key = ?", (plan, key))
                return False
            c.execute("INSERT INTO accounts (key, plan) VALUES (?, ?)", (key, plan))
            return True

    def plan_of(self, key: str) -> str | None:
        with self.atomic() as c:
            row = c.execute("SELECT plan FROM accounts WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def accounts(self) -> list[tuple[str, str]]:
        with self.atomic() as c:
            rows = c.execute("SELECT key, plan FROM accounts ORDER BY seq").fetchall()
        return [(str(k), str(p)) for k, p in rows]

    # -- chatbots ---------------------------------------------------------------------------
    def create_chatbot(self, chatbot_id: str, account: str, settings: JSON, icon: bool) -> None:
        now = time.time()
        with self.atomic() as c:
            c.execute(
                "INSERT INTO chatbots (id, account, settings, icon, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (chatbot_id, account, json.dumps(settings), int(icon), now, now),
            )

    def chatbot(self, chatbot_id: str) -> Chatbot | None:
        with self.atomic() as c:
            row = c.execute(
                "SELECT id, account, settings, icon, created_at, updated_at FROM chatbots"
                " WHERE id = ?",
                (chatbot_id,),
            ).fetchone()
        return None if row is None else _chatbot(row)

    def chatbots(self, account: str | None = None) -> list[Chatbot]:
        sql = "SELECT id, account, settings, icon, created_at, updated_at FROM chatbots"
        with self.atomic() as c:
            if account is None:
                rows = c.execute(sql + " ORDER BY seq").fetchall()
            else:
                rows = c.execute(sql + " WHERE account = ? ORDER BY seq", (account,)).fetchall()
        return [_chatbot(r) for r in rows]

    def update_chatbot(
        self, chatbot_id: str, settings: JSON | None = None, icon: bool | None = None
    ) -> None:
        """Merge top-level `settings` keys (a nested object given replaces the stored one)."""
        with self.atomic() as c:
            bot = self.chatbot(chatbot_id)
            if bot is None:
                raise KeyError(chatbot_id)
            merged = {**bot.settings, **(settings or {})}
            new_icon = bot.icon if icon is None else icon
            c.execute(
                "UPDATE chatbots SET settings = ?, icon = ?, updated_at = ? WHERE id = ?",
                (json.dumps(merged), int(new_icon), time.time(), chatbot_id),
            )

    def delete_chatbot(self, chatbot_id: str) -> None:
        """Contract section 3: the chatbot and all associated data go."""
        with self.atomic() as c:
            for table in ("attributes", "contacts", "conversations", "replies"):
                c.execute(f"DELETE FROM {table} WHERE chatbot_id = ?", (chatbot_id,))
            c.execute("DELETE FROM chatbots WHERE id = ?", (chatbot_id,))

    # -- custom attributes ------------------------------------------------------------------
    def attributes(self, chatbot_id: str) -> list[JSON]:
        with self.atomic() as c:
            rows = c.execute(
                "SELECT record FROM attributes WHERE chatbot_id = ? ORDER BY seq", (chatbot_id,)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def attribute(self, chatbot_id: str, name: str) -> JSON | None:
        with self.atomic() as c:
            row = c.execute(
                "SELECT record FROM attributes WHERE chatbot_id = ? AND name = ?",
                (chatbot_id, name),
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put_attribute(self, chatbot_id: str, record: JSON) -> None:
        """Insert or replace by name, keeping the original position in listings."""
        with self.atomic() as c:
            c.execute(
                "INSERT INTO attributes (chatbot_id, name, record) VALUES (?, ?, ?)"
                " ON CONFLICT (chatbot_id, name) DO UPDATE SET record = excluded.record",
                (chatbot_id, record["name"], json.dumps(record)),
            )

    def put_raw_attribute(self, chatbot_id: str, record: Any) -> None:
        """Append a record as given (any JSON), listed after the others: one whose name is
        text replaces the record of that name; any other is kept under a key of its own."""
        name = record.get("name") if isinstance(record, dict) else None
        with self.atomic() as c:
            key = name if isinstance(name, str) else f"\0off-contract-{self._next_seq(c)}"
            c.execute(
                "INSERT INTO attributes (chatbot_id, name, record) VALUES (?, ?, ?)"
                " ON CONFLICT (chatbot_id, name) DO UPDATE SET record = excluded.record",
                (chatbot_id, key, json.dumps(record)),
            )

    @staticmethod
    def _next_seq(c: sqlite3.Connection) -> int:
        row = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM attributes").fetchone()
        return int(row[0])

    # -- contacts ---------------------------------------------------------------------------
    def contacts(self, chatbot_id: str, offset: int = 0, limit: int = -1) -> list[JSON]:
        with self.atomic() as c:
            rows = c.execute(
                "SELECT record FROM contacts WHERE chatbot_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                (chatbot_id, limit, offset),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def count_contacts(self, chatbot_id: str) -> int:
        with self.atomic() as c:
            row = c.execute(
                "SELECT COUNT(*) FROM contacts WHERE chatbot_id = ?", (chatbot_id,)
            ).fetchone()
        return int(row[0])

    def contact(self, chatbot_id: str, external_id: str) -> JSON | None:
        with self.atomic() as c:
            row = c.execute(
                "SELECT record FROM contacts WHERE chatbot_id = ? AND external_id = ?",
                (chatbot_id, external_id),
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def add_contact(self, chatbot_id: str, record: JSON) -> None:
        with self.atomic() as c:
            c.execute(
                "INSERT INTO contacts (chatbot_id, external_id, record) VALUES (?, ?, ?)",
                (chatbot_id, record["external_id"], json.dumps(record)),
            )

    def add_contacts(self, chatbot_id: str, records: list[JSON]) -> None:
        """Many at once, in one statement (the seed's and admin API's bulk path)."""
        with self.atomic() as c:
            c.executemany(
                "INSERT INTO contacts (chatbot_id, external_id, record) VALUES (?, ?, ?)",
                [(chatbot_id, r["external_id"], json.dumps(r)) for r in records],
            )

    def contact_keys(self, chatbot_id: str) -> tuple[set[str], set[str]]:
        """Every external id and (lower-cased) e-mail of the chatbot's contacts."""
        ids: set[str] = set()
        emails: set[str] = set()
        for record in self.contacts(chatbot_id):
            ids.add(record["external_id"])
            if record.get("email"):
                emails.add(str(record["email"]).lower())
        return ids, emails

    def replace_contact(self, chatbot_id: str, external_id: str, record: JSON) -> None:
        with self.atomic() as c:
            c.execute(
                "UPDATE contacts SET external_id = ?, record = ?"
                " WHERE chatbot_id = ? AND external_id = ?",
                (record["external_id"], json.dumps(record), chatbot_id, external_id),
            )

    def delete_contact(self, chatbot_id: str, external_id: str) -> None:
        with self.atomic() as c:
            c.execute(
                "DELETE FROM contacts WHERE chatbot_id = ? AND external_id = ?",
                (chatbot_id, external_id),
            )

    # -- conversations ----------------------------------------------------------------------
    def conversation(self, chatbot_id: str, conversation_id: str) -> JSON | None:
        with self.atomic() as c:
            row = c.execute(
                "SELECT record FROM conversations WHERE chatbot_id = ? AND id = ?",
                (chatbot_id, conversation_id),
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put_conversation(self, chatbot_id: str, record: JSON, created_at: float) -> None:
        with self.atomic() as c:
            c.execute(
                "INSERT INTO conversations (chatbot_id, id, created_at, record)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (chatbot_id, id)"
                " DO UPDATE SET record = excluded.record",
                (chatbot_id, record["id"], created_at, json.dumps(record)),
            )

    def conversations(self, chatbot_id: str) -> list[JSON]:
        """Newest first, so that page 1 shows what was talked about last."""
        with self.atomic() as c:
            rows = c.execute(
                "SELECT record FROM conversations WHERE chatbot_id = ?"
                " ORDER BY created_at DESC, seq DESC",
                (chatbot_id,),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- scripted chat replies (sandbox.scripts) ----------------------------------------------
    def replies(self, chatbot_id: str) -> list[JSON]:
        with self.atomic() as c:
            row = c.execute(
                "SELECT script FROM replies WHERE chatbot_id = ?", (chatbot_id,)
            ).fetchone()
        return [] if row is None else list(json.loads(row[0]))

    def set_replies(self, chatbot_id: str, script: list[JSON]) -> None:
        with self.atomic() as c:
            c.execute(
                "INSERT INTO replies (chatbot_id, script) VALUES (?, ?)"
                " ON CONFLICT (chatbot_id) DO UPDATE SET script = excluded.script",
                (chatbot_id, json.dumps(script)),
            )


def _chatbot(row: tuple[Any, ...]) -> Chatbot:
    return Chatbot(
        id=row[0],
        account=row[1],
        settings=json.loads(row[2]),
        icon=bool(row[3]),
        created_at=float(row[4]),
        updated_at=float(row[5]),
    )
