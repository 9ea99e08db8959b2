"""Runs tests/support/store_conformance.py, unchanged, against every backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.store_backends import BACKENDS, open_backend
from tests.support.store_conformance import *  # noqa: F403 - the suite's tests are collected here
from tests.support.store_conformance import StoreBackend


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    with open_backend(request.param, tmp_path) as backend:
        yield backend
