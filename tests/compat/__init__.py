"""The GPU MODE compatibility suite: one small leaderboard per class of real problems (README.md)."""
