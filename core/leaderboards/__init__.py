"""Leaderboards: reading task folders (GPU MODE's format), the leaderboard rows made from them,
and the one ranking query."""
