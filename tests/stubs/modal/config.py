"""``modal.config.config``: where the SDK reads its credentials (``token_id``; no call is made)."""

from __future__ import annotations

import os
from typing import Any


class Config:
    """Values set with ``override_locally`` first, then ``MODAL_<KEY>`` from the environment.

    Modal's ``override_locally`` writes the environment variable; this one keeps the value in
    memory, so a test's credentials never reach another test that imports the real SDK."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def get(self, key: str, profile: str | None = None, use_env: bool = True) -> Any:
        if key in self._values:
            return self._values[key]
        return os.environ.get(f"MODAL_{key.upper()}") if use_env else None

    def override_locally(self, key: str, value: Any) -> None:
        self._values[key] = value


config = Config()
