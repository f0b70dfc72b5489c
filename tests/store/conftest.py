from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from .scenario import Scenario


@pytest.fixture
def scenario(engine: Engine) -> Scenario:
    return Scenario(engine)
