"""A minimal loopback HTTP server for benchmarks: it answers botctl's reads (the chatbot list
and each chatbot's attribute list) from answers made once, at start, so that what a benchmark
measures is botctl's own cost, not an emulator's.

    python bench/bare_server.py --bots 5000 --attributes 20     # prints "serving at URL"

HTTP/1.1 with keep-alive, one asyncio protocol, nothing parsed beyond the request line and
``Content-Length``. Not a service: every other request is a 404.
"""

from __future__ import annotations

import argparse
import asyncio
import json

PREFIX = "/api/v1"


def chatbot(i: int) -> dict[str, object]:
    return {
        "id": f"bench-{i:04d}",
        "name": f"Bench bot {i}",
        "model": "gpt-5-mini",
        "visibility": "public",
        "temp": 0.3,
    }


def attributes(count: int) -> list[dict[str, object]]:
    return [
        {"name": f"attr_{j:02d}", "type": "text", "label": f"Attribute {j}", "archived": False}
        for j in range(count)
    ]


def answers(bots: int, count: int) -> dict[str, bytes]:
    """Each path's whole response, headers and body."""
    made = {f"{PREFIX}/get-chatbots": {"chatbots": [chatbot(i) for i in range(bots)]}}
    listed = {"data": attributes(count)}
    for i in range(bots):
        made[f"{PREFIX}/chatbots/bench-{i:04d}/custom-attributes"] = listed
    return {path: _response(200, body) for path, body in made.items()}


def _response(status: int, body: object) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


_NOT_FOUND = _response(404, {"error": "not found"})


class _Protocol(asyncio.Protocol):
    def __init__(self, table: dict[str, bytes]) -> None:
        self.table = table
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            path = head.split(b" ", 2)[1].decode().split("?", 1)[0]
            assert self.transport is not None
            self.transport.write(self.table.get(path, _NOT_FOUND))


async def serve(bots: int, count: int) -> None:
    table = answers(bots, count)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(table), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"serving at http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=5000)
    parser.add_argument("--attributes", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(serve(args.bots, args.attributes))


if __name__ == "__main__":
    main()
