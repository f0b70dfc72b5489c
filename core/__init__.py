"""The brain of kernelcup, platform-neutral: no chat SDK, no Modal, no adapter or runner.

- ``app``: the one object every adapter talks to; ``messages``: the ``Request`` in and the
  ``Reply`` out; ``commands/``: every command, the same on every platform.
- ``pipeline/``: a submission accepted, its jobs run on a runner, followed, reported, delivered.
- ``leaderboards/``: task folders read, leaderboard rows, the one ranking query.
- ``scheduling/``: deadlines on a clock, the final standings, announcements.
- ``access/``: users, roles, API tokens, sessions, visibility and rate limits.
- ``store/``: the database, its tables and migrations.
- ``config``, ``errors``, ``logging``, ``plugins`` (adapters and runners by entry point), ``when``.
"""

if __name__ != "kernelcup.core":  # ``import core`` from the repository root: a second copy of every module
    raise ImportError(f"import kernelcup.core, not {__name__} (kernelcup/__init__.py says why)")
