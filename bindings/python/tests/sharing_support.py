"""Helpers of the shared-budget and Ray tests: a real ``redis-server`` on a loopback port,
the tokens a recorded request was charged, and Ray.

``redis_server()`` skips the test with a message when ``redis-server`` is not installed,
and ``need_ray()`` when Ray is not, unless ``CI`` is set: then they fail (CI installs them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from types import ModuleType
from typing import Iterator, List, Sequence

import pytest

from fake_openai import Recorded

#: How long a started redis-server may take to accept connections: a safety net for one
#: that never does, not a bound on how fast it starts (it polls, and goes on at once).
START_DEADLINE_S = 60.0


def need_ray() -> ModuleType:
    """The ``ray`` module, or the test skipped (failed under ``CI``) without it."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed: scripts/python-tests.sh installs it in CI")
        pytest.skip("ray is not installed (pip install 'ray[data]'; scripts/python-tests.sh does)")
    return ray


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A fresh ``redis-server`` (no persistence) on 127.0.0.1; yields its URL and kills it
    afterwards."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed: CI must install it (apt-get install -y redis-server)")
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    last = ""
    # The port is picked before redis binds it: another process may take it first.
    for _attempt in range(3):
        port = _free_port()
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline and proc.poll() is None and not _listening(port):
            time.sleep(0.02)
        if proc.poll() is None and _listening(port):
            try:
                yield f"redis://127.0.0.1:{port}/"
            finally:
                proc.kill()
                proc.wait(timeout=10)
            return
        proc.kill()
        _, err = proc.communicate(timeout=10)
        last = err.decode(errors="replace")[-500:] or f"not listening on {port} in time"
    pytest.fail(f"redis-server did not start: {last}")


def _tokenizer():
    # cl100k_base, as synthkit counts for a server without /tokenize (LlamaIndex ships
    # the encoding, so no download).
    from llama_index.core.utils import get_tokenizer

    return get_tokenizer()


def charges(requests: Sequence[Recorded]) -> List[int]:
    """What each request was charged against a tokens-per-minute budget, recomputed from
    what the server received: its prompt (chat: each message's role and content plus 3)
    counted with cl100k_base, plus its whole ``max_tokens``."""
    count = _tokenizer()
    out = []
    for r in requests:
        messages = r.body.get("messages")
        if messages is not None:
            prompt = sum(len(count(m["role"])) + len(count(m["content"] or "")) + 3 for m in messages)
        else:
            prompt = len(count(r.body.get("prompt", "")))
        out.append(prompt + int(r.body.get("max_tokens") or 0))
    return out


def steady_tokens_per_minute(requests: Sequence[Recorded], burst_tokens: int) -> float:
    """The tokens per minute the server saw once the budget's burst was spent.

    The budget is a GCRA bucket: from the first call at ``t0``, a budget that was never
    idle has admitted at most ``burst + rate * (t - t0)`` by ``t``, and exactly that when
    calls were waiting for it at ``t``. So with calls waiting at the end of the run, the
    tokens seen minus the burst, over the run's span, is the rate the budget held.
    """
    ordered = sorted(requests, key=lambda r: r.at)
    span = ordered[-1].at - ordered[0].at
    total = sum(charges(ordered))
    return (total - burst_tokens) / span * 60.0
