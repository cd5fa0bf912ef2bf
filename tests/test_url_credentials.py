"""#23 item 9: URLs in messages show no credential, whatever its spelling; a URL whose path is
the credential (a Slack webhook) is shown by its origin only; bidirectional controls are
shown, never obeyed."""

from __future__ import annotations

import pytest

from botctl.store.backend import redact
from botctl.values import controls_shown, mask_url_credentials, url_origin


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://u:p@ss@host/x", "https://***@host/x"),  # the password holds an '@'
        (
            "git+https://robot:tok@github.com/a/b.git#main:s",
            "git+https://***@github.com/a/b.git#main:s",
        ),
        ("https://host/repo?access_token=abc123&x=1", "https://host/repo?access_token=***&x=1"),
        (
            "https://h/o?X-Amz-Signature=ff00&X-Amz-Credential=AK/1",
            "https://h/o?X-Amz-Signature=***&X-Amz-Credential=***",
        ),
        ("https://h/?private_token=glpat-1;api_key=k2", "https://h/?private_token=***;api_key=***"),
        ("see https://a:b@h1/x and ssh://git@h2/y", "see https://***@h1/x and ssh://***@h2/y"),
        ("https://host/path?page=2&sort=name", "https://host/path?page=2&sort=name"),
        ("no url: x=1 & key", "no url: x=1 & key"),
    ],
)
def test_credentials_in_urls_are_masked(text: str, shown: str) -> None:
    assert mask_url_credentials(text) == shown
    assert redact(text) == shown  # the state backends' messages


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://hooks.slack.com/services/T00/B00/XXXXSECRET", "https://hooks.slack.com"),
        ("http://user:pw@127.0.0.1:8080/hook?token=1", "http://127.0.0.1:8080"),
        ("not a url", "(a URL)"),
    ],
)
def test_a_notification_url_is_shown_by_its_origin(url: str, origin: str) -> None:
    assert url_origin(url) == origin


def test_bidirectional_controls_are_shown_not_obeyed() -> None:
    spoofed = "result: \u202eSSAP\u202c \u2066x\u2069 \u200f\u061c"
    assert controls_shown(spoofed) == ("result: \\u202eSSAP\\u202c \\u2066x\\u2069 \\u200f\\u061c")
    assert controls_shown("a\x1bb\x9bc") == "a\\x1bb\\x9bc"
    assert controls_shown("é ü 中文 emoji 🙂") == "é ü 中文 emoji 🙂"
