"""Shared fixtures: the loopback OpenAI-compatible server."""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture()
def fake_server() -> Iterator[FakeOpenAI]:
    """A fresh loopback server answering with the default fixed text."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests never go through a proxy set in the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
