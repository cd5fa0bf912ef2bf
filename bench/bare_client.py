"""The reads of a plan and nothing else, by a bare keep-alive ``httpx.AsyncClient``: the floor of
any client built on httpx (``bench/bench_plan_large.py`` runs it in a process of its own).

    python bench/bare_client.py URL --bots 5000 --parallelism 8

The chatbot list, then every chatbot's attribute list (``bench/bare_server.py``'s ids), each
answer parsed as JSON; imports nothing of botctl.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx


async def bare_reads(url: str, bots: int, parallelism: int) -> None:
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    async with httpx.AsyncClient(base_url=f"{url}/api/v1", limits=limits) as client:
        gate = asyncio.Semaphore(parallelism)
        json.loads((await client.get("/get-chatbots")).content)

        async def read(i: int) -> None:
            async with gate:
                reply = await client.get(f"/chatbots/bench-{i:04d}/custom-attributes")
                json.loads(reply.content)

        await asyncio.gather(*(read(i) for i in range(bots)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--bots", type=int, default=5000)
    parser.add_argument("--parallelism", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(bare_reads(args.url, args.bots, args.parallelism))


if __name__ == "__main__":
    main()
