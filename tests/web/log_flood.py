"""Many readers of one submission's logs at once, in a process of their own, for
``test_log_reads.py``: their work (a gigabyte of responses parsed by httpx) must not share the
server's interpreter, or the test would measure the client.

Usage: ``python tests/web/log_flood.py BASE_URL TOKEN COUNT PATH [PATH ...]``: COUNT reads at
once, taking the paths in turn; each body is read to its end and dropped. Prints one JSON line:
``{"statuses": {"200": n, ...}, "bytes": total, "seconds": s}``.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections import Counter

import httpx


async def flood(base_url: str, token: str, count: int, paths: list[str]) -> dict[str, object]:
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    got = 0

    async def read(path: str) -> int:
        nonlocal got
        async with http.stream("GET", path, headers={"Authorization": f"Bearer {token}"}) as response:
            async for chunk in response.aiter_raw():
                got += len(chunk)
        return response.status_code

    began = time.monotonic()
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as http:
        statuses = await asyncio.gather(*(read(paths[n % len(paths)]) for n in range(count)),
                                        return_exceptions=True)
    counted = Counter(str(s) if isinstance(s, int) else type(s).__name__ for s in statuses)
    return {"statuses": dict(counted), "bytes": got, "seconds": time.monotonic() - began}


def main() -> None:
    base_url, token, count, *paths = sys.argv[1:]
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(json.dumps(asyncio.run(flood(base_url, token, int(count), paths))), flush=True)


if __name__ == "__main__":
    main()
