"""The attacker of #20: whoever reads every byte botctl stored (a git backend's whole history,
a saved plan) and the configuration (it sits in the same repository), with a dictionary of
candidates that holds the secret (10,000 by default, 100,000 in the long run:
``BOTCTL_ATTACK_CANDIDATES``, ``tests/samples.py``), cannot tell which candidate it is, while
botctl, given the state key, does its job: no spurious change, and a saved plan made stale by a
rotated secret is still refused."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from botctl.sealing import FingerprintKey
from tests.e2e_support import Bench, bot_yaml
from tests.samples import sample_size
from tests.store.conftest import bare_repository

# A six-digit code: the whole space is 1,000,000; the dictionary is a run of codes around it.
PIN = "048213"
CANDIDATES = sample_size("BOTCTL_ATTACK_CANDIDATES", 10_000, 100_000)
_FIRST = max(0, min(int(PIN) - CANDIDATES // 2, 1_000_000 - CANDIDATES))
DICTIONARY = [f"{n:06d}" for n in range(_FIRST, _FIRST + CANDIDATES)]
TEMPLATES = (
    "Escalate with code {} only",
    "Escalate with code {} at once",
    "Code {}",
)  # as the YAML in the repository says
STATE_KEY = "bsk1_the-key-lives-in-a-ci-secret-never-in-the-repo"


def everything_stored(repo: Path, plan_file: Path) -> bytes:
    """Every object of the repository (commits, trees, every version of the state, the
    lock commits) and the saved plan."""
    objects = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    return objects + plan_file.read_bytes()


def fingerprints_in(data: bytes) -> set[str]:
    return {m.decode() for m in re.findall(rb"hmac-sha256:([0-9a-f]{64})", data)}


def key_material_in(data: bytes) -> set[bytes]:
    """Everything stored that could be a key: each 64-hex token (salts, key checks, blob
    ids), as text and as the bytes it spells, and every other long string."""
    found: set[bytes] = set()
    outputs = {f.encode() for f in fingerprints_in(data)}  # HMAC outputs, not keys
    for token in set(re.findall(rb"(?<![0-9a-f:])[0-9a-f]{64}(?![0-9a-f])", data)) - outputs:
        found |= {token, bytes.fromhex(token.decode())}
    for token in set(re.findall(rb'"([A-Za-z0-9_+/=-]{16,})"', data)):
        found.add(token)
    return found


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def messages(candidate: str) -> Iterable[bytes]:
    """What a fingerprint may be of: the secret, or a value built from the public YAML."""
    yield canonical(candidate)
    for template in TEMPLATES:
        yield canonical(template.format(candidate))


def identify(fingerprints: set[str], schemes: Iterable[Callable[[bytes], str]]) -> set[str]:
    """The candidates whose fingerprint, under any scheme, is one of those stored."""
    found = set()
    schemes = list(schemes)
    for candidate in DICTIONARY:
        for message in messages(candidate):
            if any(scheme(message) in fingerprints for scheme in schemes):
                found.add(candidate)
    return found


def hmac_scheme(key: bytes) -> Callable[[bytes], str]:
    return lambda message: hmac.digest(key, message, "sha256").hex()


def test_a_reader_of_every_stored_byte_cannot_identify_the_secret(
    sandbox: Any, tmp_path: Path
) -> None:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.env = {"PIN": PIN, "BOTCTL_STATE_KEY": STATE_KEY}
    bench.create_bot("bot-1", settings={"name": "Old"})
    repo = bare_repository(tmp_path / "bots.git")
    url = f"git+file://{repo}#botctl-state:state.json"
    cfg = str(bench.config_dir)

    def config(name: str, how: str = "only") -> None:
        settings = f"name: {name}\ninstructions: 'Escalate with code ${{secret:PIN}} {how}'"
        attributes = "- {name: code, type: text, label: 'Code ${secret:PIN}'}"
        bench.write("bot.yaml", bot_yaml(settings=settings, attributes=attributes))

    config("Support")
    assert bench.run("apply", "--auto-approve", "--state", url, cfg).exit_code == 0
    config("Support Desk")  # a second write: the branch's history holds both versions
    assert bench.run("apply", "--auto-approve", "--state", url, cfg).exit_code == 0
    config("Support Desk 2", "at once")  # the saved plan sends the secret
    plan_file = tmp_path / "plan.json"
    saved = bench.run("plan", "--state", url, "--out", str(plan_file), cfg)
    assert saved.exit_code == 0, saved.output

    stored = everything_stored(repo, plan_file)
    assert PIN.encode() not in stored
    assert STATE_KEY.encode() not in stored
    fingerprints = fingerprints_in(stored)
    assert len(fingerprints) >= 3  # state (settings, label) and plan: there is work to do
    salts = set(re.findall(r'"salt": "([0-9a-f]{64})"', stored.decode(errors="replace")))
    assert salts
    material = key_material_in(stored)
    assert 4 <= len(material) <= 40, len(material)  # salts, key checks, lineage, names...

    # Every scheme a reader can run from what is stored: plain SHA-256, HMAC under anything
    # stored (format 3 keyed with the salt), and botctl's own derivation with anything stored
    # taken for the state key.
    schemes: list[Callable[[bytes], str]] = [lambda m: hashlib.sha256(m).hexdigest()]
    schemes += [hmac_scheme(k) for k in material]
    schemes += [
        hmac_scheme(FingerprintKey(salt, k).hmac_key)
        for salt in salts
        for k in material
        if len(k) == 64  # the hex tokens, as text: what a key taken from a file would be
    ]
    assert identify(fingerprints, schemes) == set()

    # The same procedure, given the state key, finds the code: the attack is a real one.
    keyed = [hmac_scheme(FingerprintKey(salt, STATE_KEY.encode()).hmac_key) for salt in salts]
    assert identify(fingerprints, keyed) == {PIN}

    # botctl, with the key, does its job: in sync after the applies...
    config("Support Desk")
    bench.clear_log()
    planned = bench.run("plan", "--format", "json", "--state", url, cfg)
    assert json.loads(planned.stdout)["changes"] == []
    # ...and the saved plan is refused once the code is rotated, naming the variable.
    rotated = bench.run("apply", "--plan", str(plan_file), "--state", url, env={"PIN": "731904"})
    assert rotated.exit_code == 1
    assert "the secret $PIN changed since the plan was made" in rotated.stderr
    assert bench.writes() == []
