"""Migration 0009: leaderboards stored before it learn that ``lang: cu`` ones need a CUDA GPU."""

from __future__ import annotations

from sqlalchemy import text

from kernelcup.core.store.db import make_engine, upgrade

INSERT = text(
    "INSERT INTO leaderboard (name, description, lang, deadline, ranking_by, visibility, task_json, secret_seed,"
    " paused, created_at) VALUES (:name, '', :lang, '2030-01-01 00:00:00+00:00', 'geom', 'public', '{}', 1,"
    " :no, '2026-01-01 00:00:00+00:00')"
)


def test_cuda_source_leaderboards_stored_before_need_cuda_after_the_upgrade(blank_database_url: str) -> None:
    upgrade(blank_database_url, "0008")
    engine = make_engine(blank_database_url)
    try:
        with engine.begin() as connection:
            connection.execute(INSERT, {"name": "vectoradd_cuda", "lang": "cu", "no": False})
            connection.execute(INSERT, {"name": "vectoradd", "lang": "py", "no": False})
        upgrade(engine)
        with engine.connect() as connection:
            found: dict[str, bool] = {name: bool(cuda) for name, cuda in connection.execute(
                text("SELECT name, needs_cuda FROM leaderboard")).all()}
        assert found == {"vectoradd_cuda": True, "vectoradd": False}
    finally:
        engine.dispose()
