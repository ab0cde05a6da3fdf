"""Shared fixtures: the loopback OpenAI-compatible server."""

from __future__ import annotations

import os
import signal
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


@pytest.fixture()
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt while the test runs, as in a terminal, whatever the
    suite inherited: a shell starting it in the background (`cmd &`, nohup, some CI
    runners) ignores SIGINT, and then `_thread.interrupt_main` does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests never go through a proxy set in the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
