"""Every seed the harness hands to ``generate_input``.

Test and benchmark runs use the leaderboard's public case seeds, so a user can reproduce a
failure locally with the seed the verdict prints. Ranked runs never use a case seed directly:
each one is replaced by ``SHA-256(secret, job nonce, case seed, purpose, index)``. The hash
makes a derived seed reveal nothing about the secret, and the per-job nonce makes every ranked
run draw new inputs, so seeds printed by one run are no use to the next. Derived seeds stay
below 2**31: GPU MODE's CUDA drivers read seeds with ``std::stoi`` and numpy takes 32 bits.
"""

from __future__ import annotations

import hashlib
import os

from kernelcup.harness.spec import Case

SEED_LIMIT = 2**31
SEED_KEY = "seed"


class SeedPlan:
    def __init__(self, secret: int | None, nonce: bytes | None = None) -> None:
        self._secret = secret
        self._nonce = nonce if nonce is not None else os.urandom(16)

    @property
    def ranked(self) -> bool:
        return self._secret is not None

    def case(self, case: Case, purpose: str, index: int = 0) -> Case:
        """The keyword arguments for one ``generate_input`` call.

        ``purpose`` separates the streams ("test", "bench", ...); ``index`` numbers the calls
        within a case so that timed calls each get fresh inputs.
        """
        if SEED_KEY not in case or not isinstance(case[SEED_KEY], int):
            return dict(case)
        public = int(case[SEED_KEY])
        if self._secret is None and index == 0:
            return dict(case)
        out = dict(case)
        out[SEED_KEY] = self._derive(public, purpose, index)
        return out

    def _derive(self, public: int, purpose: str, index: int) -> int:
        digest = hashlib.sha256()
        digest.update(b"kernelcup-seed-v1\0")
        if self._secret is not None:
            digest.update(b"secret\0" + str(self._secret).encode() + b"\0")
            digest.update(self._nonce)
        digest.update(f"\0{public}\0{purpose}\0{index}".encode())
        return int.from_bytes(digest.digest()[:8], "big") % SEED_LIMIT
