"""Fixtures shared by the Teams tests that run the bot against a mock Bot Framework connector."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer

from tests.teams.harness import MockConnector


@pytest.fixture
async def connector() -> AsyncIterator[tuple[MockConnector, str]]:
    """The mock connector, served on 127.0.0.1, and its service URL."""
    mock = MockConnector()
    server = TestServer(mock.app(), host="127.0.0.1")
    await server.start_server()
    yield mock, str(server.make_url("/_connector"))
    await server.close()
