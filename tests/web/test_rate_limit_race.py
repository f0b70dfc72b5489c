"""The rate limit under concurrent submissions (issue #37): one user's posts are counted and
inserted one at a time, by every bot process sharing the database, so no burst gets past it.

Two kernelcup apps, each with its own engine, event loop and worker threads, serve the same
database over real HTTP (uvicorn), as two bot processes would; SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import Engine

from kernelcup.core.store.db import make_engine
from tests.web.conftest import ALICE, BOB, Clock, ScriptedRunner, ServerThread, bearer, build_app, solution, token_for

LIMIT = 30  # the shipped default: limits.submissions_per_hour
POSTS = 60


@pytest.fixture
def engines(database_url: str) -> Iterator[tuple[Engine, Engine]]:
    first, second = make_engine(database_url), make_engine(database_url)
    yield first, second
    first.dispose()
    second.dispose()


async def _post(http: httpx.AsyncClient, url: str, token: str, number: int) -> int:
    code = solution() + f"\n# post {number}\n".encode()
    response = await http.post(f"{url}/api/submissions", headers=bearer(token),
                               data={"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                               files={"file": ("kernel.py", code, "text/x-python")})
    return response.status_code


def test_sixty_concurrent_posts_across_two_processes_accept_at_most_the_limit(
    engines: tuple[Engine, Engine],
) -> None:
    first, second = engines
    with ServerThread(lambda: build_app(first, ScriptedRunner(), Clock())) as one, \
            ServerThread(lambda: build_app(second, ScriptedRunner(), Clock())) as other:
        assert one.app is not None
        alice, bob = token_for(one.app, ALICE), token_for(one.app, BOB)

        async def flood() -> tuple[Counter[int], int]:
            limits = httpx.Limits(max_connections=POSTS + 10)
            async with httpx.AsyncClient(timeout=120, limits=limits) as http:
                statuses = await asyncio.gather(*(
                    _post(http, (one.url, other.url)[n % 2], alice, n) for n in range(POSTS)
                ))
                return Counter(statuses), await _post(http, other.url, bob, -1)

        statuses, bobs = asyncio.run(flood())
    # Every post is answered, none with a server error; exactly the limit get through.
    assert statuses == {202: LIMIT, 429: POSTS - LIMIT}, statuses
    assert bobs == 202  # another user's limit is their own
