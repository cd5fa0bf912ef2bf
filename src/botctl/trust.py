"""What a repository's files may reach, decided by the operator (README, "Trust").

A configuration repository is the input of whoever can open a pull request or push a commit,
so its files (the YAML, ``botctl.yaml``, the tests) read only the environment variables the
operator exposes to them, whichever way they name one: ``${VAR}``, ``${secret:VAR}`` or a
chatbot's ``apiKeyEnv``. The operator says which with ``BOTCTL_ALLOW_ENV`` (names and globs,
comma- or space-separated; ``default`` stands for the default list below); the repository
cannot widen it.

- botctl's own secrets (the state keys, the git token, the agent's webhook secret) are never
  exposed, whatever the list says;
- the default (``BOTCTL_ALLOW_ENV`` unset) exposes every other variable except the CI
  platforms', the clouds' and the package and signing tools' (``GITHUB_*``, ``AWS_*``,
  ``CI_*``, ...) and botctl's own configuration (``BOTCTL_*``; an API key variable stays
  usable as an ``apiKeyEnv``); plain ``${VAR}``, which is shown in plans and kept in the
  state in clear, also never reads a name that looks like a credential (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...): a secret is read as ``${secret:VAR}``,
  masked in every output and kept only as a fingerprint.

``ci_detected`` says whether botctl runs in CI, where an API key goes only to a URL the
operator gave (``cli.options``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from botctl.defaults import DEFAULT_API_KEY_ENV, OLD_STATE_KEY_ENV, STATE_KEY_ENV

ALLOW_ENV = "BOTCTL_ALLOW_ENV"
GIT_TOKEN_ENV = "BOTCTL_GIT_TOKEN"
DEFAULT_WORD = "default"
# Never exposed to a configuration, whatever the operator's list says.
OWN_SECRETS = (STATE_KEY_ENV, OLD_STATE_KEY_ENV, GIT_TOKEN_ENV)
# Variables of CI platforms, clouds, package registries and signing tools: where a runner's
# credentials live. Not exposed by the default list.
PLATFORM_PATTERNS = (
    "ACTIONS_*",
    "ARM_*",
    "AWS_*",
    "AZURE_*",
    "BITBUCKET_*",
    "BOTCTL_*",
    "BUILDKITE_*",
    "CI_*",
    "CIRCLE_*",
    "CLOUDSDK_*",
    "DOCKER_*",
    "GCLOUD_*",
    "GCP_*",
    "GITHUB_*",
    "GITLAB_*",
    "GOOGLE_*",
    "GPG_*",
    "KUBE*",
    "NPM_*",
    "PIP_*",
    "PYPI_*",
    "RUNNER_*",
    "SSH_*",
    "SYSTEM_*",
    "TWINE_*",
    "UV_*",
    "VAULT_*",
)
# A name that looks like a credential: never read as plain ${VAR} by the default list.
_CREDENTIAL = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE"
    r"|(?:^|_)(?:PASS|PWD|PIN|SIG|DSN|JWT|OTP|CERT|SALT|WEBHOOK)(?:_|$)",
    re.IGNORECASE,
)
CI_VARIABLES = (
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "CIRCLECI",
    "BUILDKITE",
    "JENKINS_URL",
    "TF_BUILD",
    "TRAVIS",
    "BITBUCKET_BUILD_NUMBER",
    "DRONE",
    "TEAMCITY_VERSION",
    "CODEBUILD_BUILD_ID",
)

Use = Literal["text", "secret", "key"]  # ${VAR}, ${secret:VAR}, apiKeyEnv
_USES = {"text": "${%s}", "secret": "${secret:%s}", "key": "apiKeyEnv %s"}


@dataclass(frozen=True)
class Exposure:
    """The variables a configuration may read: ``allowed`` (the operator's list: names,
    globs, ``default``; None: the default list) and ``never`` (botctl's own secrets, and the
    agent's webhook secret's variable)."""

    allowed: tuple[str, ...] | None = None
    never: frozenset[str] = frozenset(OWN_SECRETS)

    @classmethod
    def of(cls, environ: Mapping[str, str], never: Iterable[str] = ()) -> Exposure:
        """The operator's exposure, as ``environ`` sets it (``BOTCTL_ALLOW_ENV``)."""
        return _exposure(environ.get(ALLOW_ENV), frozenset(never))

    def refusal(self, name: str, use: Use) -> str | None:
        """Why a configuration may not read ``name`` as ``use`` (None: it may), in words
        that say how the operator exposes it."""
        shown = _USES[use] % name
        if name in self.never:
            return (
                f"{shown}: {name} is one of botctl's own secrets, which no configuration may "
                "read (README, Trust)"
            )
        if use == "key" and name == DEFAULT_API_KEY_ENV:
            return None
        if self.allowed is None:
            why = _default_refusal(name, use)
            if why is None:
                return None
            return (
                f"{shown}: {name} is not exposed to the configuration ({why}); the operator "
                f"exposes it with {ALLOW_ENV}={DEFAULT_WORD},{name} (README, Trust)"
                + (_AS_SECRET % name if use == "text" and _CREDENTIAL.search(name) else "")
            )
        if any(_matches(name, word, use) for word in self.allowed):
            return None
        return (
            f"{shown}: {name} is not in {ALLOW_ENV}, the variables the operator exposes to the "
            f"configuration; add it there (README, Trust)"
        )


@functools.lru_cache(maxsize=64)
def _exposure(text: str | None, never: frozenset[str]) -> Exposure:
    """One per list and set of secrets: every document of a run asks for it."""
    allowed = None if text is None else tuple(w for w in re.split(r"[,\s]+", text) if w)
    return Exposure(allowed, frozenset(OWN_SECRETS) | never)


_AS_SECRET = "; if it holds a secret, write ${secret:%s}: masked in every output, never stored"


def _matches(name: str, word: str, use: Use) -> bool:
    if word == DEFAULT_WORD:
        return _default_refusal(name, use) is None
    return fnmatch.fnmatchcase(name, word)


@functools.lru_cache(maxsize=4096)
def _default_refusal(name: str, use: Use) -> str | None:
    """Why the default list does not expose ``name`` as ``use`` (None: it does)."""
    platform = next((p for p in PLATFORM_PATTERNS if fnmatch.fnmatchcase(name, p)), None)
    if platform is not None:
        return f"the default keeps {platform} variables from it: a runner's credentials live there"
    if use == "text" and _CREDENTIAL.search(name):
        return "plain ${VAR} is shown and stored in clear, and the name looks like a credential"
    return None


def ci_detected(environ: Mapping[str, str]) -> str | None:
    """What says that botctl runs in CI (``CI=true``, ``GITHUB_ACTIONS=true``...), or None."""
    for name in ("CI", *CI_VARIABLES):
        value = environ.get(name, "").strip()
        if value and value.lower() not in ("0", "false", "no", "off"):
            return f"{name}={value}" if name == "CI" or len(value) < 12 else name
    return None


class ExposedEnviron(Mapping[str, str]):
    """The environment as a run's configuration is loaded with it: every variable readable by
    botctl itself (the API keys through ``apiKeyEnv``), and the ``exposure`` that decides
    which of them the configuration may name."""

    def __init__(self, environ: Mapping[str, str], exposure: Exposure) -> None:
        self._environ = environ
        self.exposure = exposure

    def __getitem__(self, name: str) -> str:
        return self._environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)


def exposure_of(environ: Mapping[str, str]) -> Exposure:
    """The exposure a configuration read with ``environ`` is under: the one it carries, else
    the operator's as ``environ`` sets it."""
    return environ.exposure if isinstance(environ, ExposedEnviron) else Exposure.of(environ)
