"""The Ray example (examples/ray_batch.py) end to end: a local Ray with 2 CPUs, 2 actors, a
loopback OpenAI-compatible server and a real Redis holding the shared budget and cache.

Skipped with a message when Ray is not installed, unless ``CI`` is set: then it fails
(scripts/python-tests.sh installs it).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

import synthkit_rs
from fake_openai import FakeOpenAI
from sharing_support import charges, redis_server, steady_tokens_per_minute

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ray_batch.py"
NODES = ["The primary mirror is cleaned every six months.", "The dome opens at dusk."]
NUM_OUTPUT = 64


def _need_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed: scripts/python-tests.sh installs it in CI")
        pytest.skip("ray is not installed (pip install 'ray[data]'; scripts/python-tests.sh does)")


def test_ray_actors_answer_every_request_once_within_one_shared_budget(
    tmp_path: pathlib.Path,
) -> None:
    _need_ray()
    tpm = 30_000
    steady_s = 25
    with redis_server() as redis_url, FakeOpenAI() as server:
        probe = synthkit_rs.Synthesizer(base_url=server.base_url, num_output=NUM_OUTPUT)
        probe.synthesize("question 1000?", NODES)
        charge = charges(server.requests)[0]
        server.reset()
        # The budget's burst (a minute's worth), then `steady_s` seconds at the rate.
        total = math.ceil(tpm * (1 + steady_s / 60) / charge) + 2
        requests = tmp_path / "requests.jsonl"
        with requests.open("w") as f:
            for i in range(total):
                f.write(json.dumps({"id": f"r{i}", "query": f"question {i}?", "nodes": NODES}) + "\n")
        results = tmp_path / "results.jsonl"
        proc = subprocess.run(
            [sys.executable, str(EXAMPLE), str(requests), str(results),
             "--base-url", server.base_url, "--num-output", str(NUM_OUTPUT),
             "--tpm", str(tpm), "--redis-url", redis_url, "--cache", "redis",
             "--actors", "2", "--num-cpus", "2", "--batch-size", "16"],
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        lines = [json.loads(line) for line in results.read_text().splitlines()]
        ids = [line["id"] for line in lines]
        assert sorted(ids) == sorted(f"r{i}" for i in range(total))
        errors = [line for line in lines if "response" not in line]
        assert errors == []
        # Every request reached the model server exactly once.
        assert server.calls == total
        prompts = sorted(r.prompt for r in server.requests)
        assert len(set(prompts)) == total
        rate = steady_tokens_per_minute(server.requests, burst_tokens=tpm)
        print(f"steady rate at the server: {rate:.0f} tokens/minute, cap {tpm}")
        assert abs(rate / tpm - 1) <= 0.05, f"{rate:.0f} tokens/minute against a cap of {tpm}"
