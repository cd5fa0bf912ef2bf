"""Content-Encoding decoding in bounded steps.

httpx inflates each raw chunk of a gzip body whole: 64 KiB of a gzip bomb become up to 64 MiB
in one step, before anything can count them. Here no step yields more than ``PIECE`` bytes, so
the caller's cap on the decoded size holds within 64 KiB, and memory with it.

Only the codings botctl asks for (``ACCEPT_ENCODING``) are decoded; any other is an error,
never a body passed on undecoded.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

import httpx

PIECE = 64 * 1024  # most bytes one inflate step may produce
MAX_CODINGS = 2  # "gzip, gzip" at most: more layers is no service's honest answer
# What botctl asks for (the client sends it as Accept-Encoding) and can therefore decode.
ACCEPT_ENCODING = "gzip, deflate"


class Decoder:
    """Every coding of one body, undone in order: ``feed`` raw bytes, then ``finish``."""

    def __init__(self, content_encoding: str, request: httpx.Request) -> None:
        self.layers = _layers(content_encoding, request)

    def feed(self, raw: bytes) -> Iterator[bytes]:
        return _through(self.layers, raw)

    def finish(self) -> Iterator[bytes]:
        for index, layer in enumerate(self.layers):
            for tail in layer.finish():
                yield from _through(self.layers[index + 1 :], tail)


class _Inflater:
    """zlib inflate in bounded steps: never more than ``PIECE`` bytes out per step."""

    def __init__(self, coding: str, request: httpx.Request) -> None:
        self._coding = coding
        self._request = request
        gzip = coding == "gzip"
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        # deflate is zlib-wrapped by the RFC but raw from some servers: the first bytes are
        # kept until the 2-byte zlib header has been accepted, to start again as raw if not.
        self._probe: bytes | None = None if gzip else b""
        self._fed = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._fed = self._fed or bool(data)
        if self._probe is not None:
            self._probe += data
        while True:
            try:
                out = self._inflate.decompress(data, PIECE)
            except zlib.error as exc:
                if self._probe is not None:
                    data, self._probe = self._probe, None
                    self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise self._error(f"corrupt {self._coding} data ({exc})") from None
            if self._probe is not None and len(self._probe) >= 2:
                self._probe = None
            if out:
                yield out
            data = self._inflate.unconsumed_tail
            if not data and len(out) < PIECE:
                return

    def finish(self) -> Iterator[bytes]:
        yield from self.feed(b"")
        if self._fed and not self._inflate.eof:
            raise self._error(f"the {self._coding} data ends early")

    def _error(self, message: str) -> httpx.DecodingError:
        return httpx.DecodingError(message, request=self._request)


def _layers(header: str, request: httpx.Request) -> list[_Inflater]:
    """Inflaters in the order to apply them: the last coding listed was applied last."""
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if len(codings) > MAX_CODINGS:
        raise httpx.DecodingError(
            f"the answer is encoded {len(codings)} times over ({header[:80]})", request=request
        )
    decoders = []
    for coding in reversed(codings):
        name = "gzip" if coding in ("gzip", "x-gzip") else coding
        if name not in ("gzip", "deflate"):
            raise httpx.DecodingError(
                f"the answer uses Content-Encoding {coding[:40]!r}, which botctl did not ask "
                f"for (it accepts {ACCEPT_ENCODING})",
                request=request,
            )
        decoders.append(_Inflater(name, request))
    return decoders


def _through(decoders: Sequence[_Inflater], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    for piece in decoders[0].feed(data):
        yield from _through(decoders[1:], piece)
