"""A real llama.cpp ``llama-server`` with SmolLM2-135M-Instruct on 127.0.0.1, for tests.

``scripts/llama-server.sh`` builds llama-server once into ``~/.cache/llama-server-tiny``
and fetches SmolLM2 (``scripts/fetch-smollm2.sh``); the server watches this process and
stops when it exits. When it cannot be built or fetched here (exit status 77), the test is
skipped with a message, unless ``CI`` is set: then it fails, as the Rust suites do.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from typing import Optional

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "llama-server.sh")


@dataclass
class LlamaServer:
    """A started server: ``base`` is ``http://127.0.0.1:PORT/v1``, ``root`` without ``/v1``."""

    base: str
    pid: Optional[int]

    @property
    def root(self) -> str:
        return self.base[: -len("/v1")] if self.base.endswith("/v1") else self.base

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cannot_run(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"llama-server tests cannot run ({why}) and CI is set: failing")
    pytest.skip(f"llama-server tests cannot run here ({why})")


def start_smollm2(ctx: int, args: str = "") -> LlamaServer:
    """Starts llama-server with SmolLM2 and a context of ``ctx`` tokens (or skips)."""
    url = os.environ.get("SYNTHKIT_LLAMA_SMOLLM2", "").strip()
    if url:
        return LlamaServer(base=url, pid=None)
    last = ""
    for _attempt in range(3):
        env = dict(
            os.environ,
            LLAMA_MODEL="smollm2",
            LLAMA_WATCH_PID=str(os.getpid()),
            LLAMA_SERVER_ARGS=args,
        )
        # The first run builds llama-server (about 10 minutes on 2 cores).
        out = subprocess.run(
            ["bash", SCRIPT, str(_free_port()), str(ctx)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, timeout=3600,
        )
        if out.returncode == 0:
            base, pid = out.stdout.decode().split()
            return LlamaServer(base=base, pid=int(pid))
        if out.returncode == 77:
            cannot_run("scripts/llama-server.sh cannot build llama-server or fetch SmolLM2")
        # Most likely the port was taken between choosing and binding: try another.
        last = f"llama-server.sh exited with {out.returncode}"
    raise RuntimeError(f"{last} three times; see its messages above")
