"""Content-Encoding decoding in bounded steps: no step yields more than PIECE bytes, whatever
the compression ratio, and every coding botctl accepts decodes whole, however it is chunked."""

from __future__ import annotations

import gzip
import zlib

import httpx
import pytest

from botctl.service.inflate import PIECE, Decoder

REQUEST = httpx.Request("GET", "https://api.example.test/api/v1/get-chatbots")
TEXT = b'{"chatbots": [{"id": "a", "name": "Support"}]}' * 50


def deflate(data: bytes, *, raw: bool) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def decode(encoding: str, body: bytes, chunk: int) -> bytes:
    decoder = Decoder(encoding, REQUEST)
    out = b""
    for start in range(0, len(body), chunk):
        out += b"".join(decoder.feed(body[start : start + chunk]))
    return out + b"".join(decoder.finish())


@pytest.mark.parametrize("chunk", [1, 2, 7, 4096])
@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("", TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT, mtime=0)),
        ("x-gzip", gzip.compress(TEXT, mtime=0)),
        ("deflate", deflate(TEXT, raw=False)),
        ("deflate", deflate(TEXT, raw=True)),  # what some servers send as "deflate"
        ("deflate, gzip", gzip.compress(deflate(TEXT, raw=False), mtime=0)),
        ("GZIP ", gzip.compress(TEXT, mtime=0)),
    ],
)
def test_every_accepted_coding_decodes_whole_however_it_is_chunked(
    encoding: str, body: bytes, chunk: int
) -> None:
    assert decode(encoding, body, chunk) == TEXT


def test_no_step_yields_more_than_a_piece_even_from_a_bomb() -> None:
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)  # 64 MiB in ~64 KiB
    decoder = Decoder("gzip", REQUEST)
    sizes = [len(piece) for piece in decoder.feed(bomb)]
    sizes += [len(piece) for piece in decoder.finish()]
    assert max(sizes) <= PIECE
    assert sum(sizes) == 64 << 20


def test_a_bomb_is_decoded_lazily() -> None:
    """Taking the first pieces inflates only those: the caller's cap stops it there."""
    bomb = gzip.compress(bytes(256 << 20), compresslevel=9)
    pieces = Decoder("gzip", REQUEST).feed(bomb)
    first = [next(pieces) for _ in range(3)]
    assert sum(map(len, first)) == 3 * PIECE


def test_an_empty_body_with_a_coding_is_empty() -> None:
    assert decode("gzip", b"", 1) == b""


@pytest.mark.parametrize(
    ("encoding", "body", "message"),
    [
        ("gzip", gzip.compress(TEXT, mtime=0)[:-20], "the gzip data ends early"),
        ("gzip", b"not gzip at all", "corrupt gzip data"),
        ("deflate", b"\xff" * 40, "corrupt deflate data"),
        ("br", b"", "Content-Encoding 'br', which botctl did not ask for"),
        ("compress", b"", "Content-Encoding 'compress'"),
        ("gzip, gzip, gzip", b"", "encoded 3 times over"),
    ],
)
def test_what_cannot_be_decoded_is_a_decoding_error(
    encoding: str, body: bytes, message: str
) -> None:
    with pytest.raises(httpx.DecodingError, match=message):
        decode(encoding, body, 16)
