"""Fixtures of the reliability campaigns."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.campaign import ForkServer, Source


@pytest.fixture
def fork_server(tmp_path: Path) -> Iterator[ForkServer]:
    warm_up = Source.generate(random.Random(0), units=2, stays=2).write(tmp_path / "warm-up")
    server = ForkServer(warm_up)
    yield server
    server.close()
